"""The cluster's ssh key pair: made once per cluster in the launcher's key directory (a volume),
its public half published where the workers read authorized_keys. No key is in an image."""

import os
import socket
import subprocess


def ensure_keys(key_dir, authorized_dir):
    """Returns the private key's path and whether it was made now."""
    key = os.path.join(key_dir, "id_ed25519")
    made = not os.path.exists(key)
    if made:
        os.makedirs(key_dir, exist_ok=True)
        subprocess.run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                f"horovod-cluster@{socket.gethostname()}",
                "-f",
                key,
            ],
            check=True,
        )
        os.chmod(key_dir, 0o700)
        os.chmod(key, 0o600)
    elif os.stat(key).st_mode & 0o077:
        # A key given to us (Kubernetes mounts the chart's Secret read-only, mode 0400) is
        # left alone unless ssh would refuse it for being readable by others.
        os.chmod(key, 0o600)
    if authorized_dir:
        os.makedirs(authorized_dir, exist_ok=True)
        os.chmod(authorized_dir, 0o755)  # sshd's StrictModes: not group/world writable
        target = os.path.join(authorized_dir, "authorized_keys")
        tmp = target + ".tmp"
        with open(key + ".pub") as src, open(tmp, "w") as dst:
            dst.write(src.read())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)  # a worker never reads a half-written file
    return key, made

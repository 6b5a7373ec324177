// Host memory for outputs the frontends allocate: a same-shape op's outputs as views of one
// block (NumPy: allreduce and broadcast without `out`; TensorFlow: a CPU grouped allreduce), and
// single buffers for the engine's variable-size outputs. Freed blocks are kept for the next
// call that fits, so a training loop writes every step into pages already mapped.
#pragma once

#include <cstddef>

namespace hvd {

struct HostBlock {
  void* data = nullptr;
  size_t bytes = 0;
};

// A block of at least `bytes`: a kept one that fits (the smallest, and at most twice the size),
// else new memory, 64-byte aligned, and from 4 MiB on 2 MiB aligned and advised to use
// transparent huge pages. data is null when memory is exhausted.
HostBlock TakeHostBlock(size_t bytes);

// Gives a block back once nothing refers to it: kept for a later TakeHostBlock (the newest 128,
// up to 256 MiB together; a larger block is freed, and keeping one past either bound frees the
// oldest first). Thread-safe, as TakeHostBlock is.
void KeepHostBlock(HostBlock b);

// Bytes held by kept blocks (tests).
size_t KeptHostBytes();

}  // namespace hvd

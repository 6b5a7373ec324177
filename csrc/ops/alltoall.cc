// Alltoall with per-rank splits: one alltoall of the row counts, then n-1 pairwise
// exchange steps (step s: send to r+s, receive from r-s), so every pair talks exactly once and
// no rank receives from two peers at the same time. Each rank sends the rows it addresses to
// others and receives the rows addressed to it: no redundant bytes.
#include <cstring>
#include <vector>

#include "ops/cpu_collectives.h"

namespace hvd {

bool Alltoall(const void* in, size_t row_bytes, const std::vector<int64_t>& send_rows,
              std::vector<int64_t>* recv_rows, const std::function<void*(int64_t)>& alloc,
              Comm& comm) {
  const int rank = comm.rank(), n = comm.size();
  recv_rows->assign(n, 0);
  comm.AlltoallInt64(send_rows.data(), recv_rows->data());
  // Sizes were checked for overflow at negotiation (sum of splits, received bytes).
  std::vector<size_t> soff(n + 1, 0), roff(n + 1, 0);
  int64_t total_rows = 0;
  for (int r = 0; r < n; ++r) {
    soff[r + 1] = soff[r] + send_rows[r] * row_bytes;
    roff[r + 1] = roff[r] + (*recv_rows)[r] * row_bytes;
    total_rows += (*recv_rows)[r];  // counted in rows: rows of zero bytes still count
  }
  char* out = static_cast<char*>(alloc(total_rows));
  std::vector<char> discard;
  bool ok = out != nullptr;
  if (!ok) out = static_cast<char*>(DiscardBuffer(&discard, roff[n], "ALLTOALL output"));
  const char* src = static_cast<const char*>(in);
  std::memcpy(out + roff[rank], src + soff[rank], soff[rank + 1] - soff[rank]);
  for (int s = 1; s < n; ++s) {
    int dst = (rank + s) % n, from = (rank - s + n) % n;
    SendRecvBytes(src + soff[dst], soff[dst + 1] - soff[dst], dst, out + roff[from],
                  roff[from + 1] - roff[from], from, 300, comm);
  }
  return ok;
}

}  // namespace hvd

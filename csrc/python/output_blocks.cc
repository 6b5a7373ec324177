// Output blocks (output_blocks.h): the kept host blocks, owned by a capsule while NumPy views
// of them live.
#include "python/output_blocks.h"

#include <new>

namespace hvd_py {

py::capsule TakeOutputBlock(size_t bytes, void** data) {
  hvd::HostBlock b = hvd::TakeHostBlock(bytes);
  if (!b.data) throw std::bad_alloc();
  *data = b.data;
  return OwnHostBlock(b);
}

py::capsule OwnHostBlock(hvd::HostBlock b) {
  return py::capsule(new hvd::HostBlock(b), [](void* p) {
    hvd::HostBlock* owned = static_cast<hvd::HostBlock*>(p);
    hvd::KeepHostBlock(*owned);
    delete owned;
  });
}

}  // namespace hvd_py

#pragma once

#include <cstdint>

namespace hvd {

// Whether this rank's threads (its caller and the engine's background thread) each have a core,
// and so how long a waiting thread may poll before it blocks. Read once, at hvd.init().

// The engine's thread has no core of its own: this rank is bound to one core, or the ranks of
// the machine (containers included) have fewer than two cores each.
bool SharesCore(int ranks_on_machine);

// The poll before blocking, in microseconds: `want` (the knob), or 0 where polling would take
// the core another of this rank's threads needs (`shares_core`, or mpi_yield_when_idle).
int64_t ChooseSpin(int64_t want, bool shares_core);

}  // namespace hvd

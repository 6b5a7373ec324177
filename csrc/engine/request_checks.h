#pragma once

#include <string>
#include <vector>

#include "common/message.h"
#include "transport/transport.h"

namespace hvd {

// Rank 0's check of one tensor's requests, one per rank of the process set (`net`: the set's
// context; ranks in messages are numbered as hvd.rank() numbers them). The result is the
// response every rank runs, or one error that names the tensor and the ranks that differ and
// how, so that every rank fails alike instead of one of them hanging.

// Why this rank's own request cannot run (its shape, root rank or splits in a set of `set_size`
// ranks), or "". Sizes are overflow-checked: they come from user input.
std::string InvalidArguments(const Request& r, int set_size);

// Every rank submitted it: `reqs` by rank. `join_root`: the rank hvd.join() answers (JOIN).
Response ResponseFromRequests(const Transport& net, const std::string& name,
                              const std::vector<Request>& reqs, int join_root);

// Some ranks did not submit it because they joined (hvd.join): `present[r]` whether rank r
// submitted `reqs[r]`; `joined`: the ranks absent because they joined. Only a host-memory
// allreduce runs (the joined ranks add zeros); anything else is an error naming them.
Response ResponseWithJoinedRanks(const Transport& net, const std::string& name,
                                 const std::vector<Request>& reqs, const std::vector<bool>& present,
                                 const std::vector<int>& joined);

}  // namespace hvd

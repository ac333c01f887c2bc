// failErrno; see error.h.
#include "base/error.h"

#include <cstring>

namespace rr {

void failErrno(int errnum, const std::string& what) { fail(RR_ERR_SYSTEM, "{}: {}", what, std::strerror(errnum)); }

}  // namespace rr

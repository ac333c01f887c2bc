// libFuzzer target: the handshake parsers, through the real code over a loopback TCP pair.
// The input's first byte picks the side under test: even, the server reads the rest as a
// client's hello; odd, the client reads it as the server's challenge and reply. Either
// side must reject what is wrong with an Error, never crash, never read past a buffer, and
// never wait (the input ends with a FIN).
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "fuzz/loopback_pair.h"
#include "base/error.h"
#include "transport/handshake.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  rr::LoopbackPair pair;
  pair.feed(data + 1, size - 1);  // the hostile side: its bytes, then FIN
  const rr::JobIdentity job{42, "fuzz-secret"};
  try {
    if (data[0] % 2 == 0) {
      rr::handshakeServer(pair.fd(), job, rr::deadlineIn(200),
                          [](const rr::Hello& h) { return h.rank == 1 ? "" : "rank"; });
    } else {
      rr::handshakeClient(pair.fd(), job, rr::Hello{rr::LinkRole::kData, 1, 4, 0, 2},
                          rr::deadlineIn(200), "fuzz server");
    }
  } catch (const rr::Error&) {
  }
  return 0;
}

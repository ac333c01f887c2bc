// libFuzzer target: TcpLink's frame parser and GroupHeader::decode, through the real code
// over a loopback TCP pair. The input's first byte sets the length the receiver expects;
// the rest is what the peer sent: frame headers, payloads, abort frames, op headers. The
// link must deliver exactly a frame of the expected type and length or throw an Error, and
// the decoder must accept a header or throw; nothing may crash or overrun.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/run/op_header.h"
#include "fuzz/loopback_pair.h"
#include "base/error.h"
#include "transport/tcp/tcp_link.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  rr::LoopbackPair pair;
  pair.feed(data + 1, size - 1);
  rr::EventSet events;
  std::vector<rr::Fd> sockets;
  sockets.push_back(pair.take());
  rr::TcpLink link(std::move(sockets), events, 1, 4, "fuzz peer");
  const bool header = data[0] & 1;
  const size_t len = header ? rr::GroupHeader::kBytes : static_cast<size_t>(data[0]) * 16;
  std::vector<uint8_t> buf(len + 1);
  try {
    link.postRecv(buf.data(), len, header ? rr::FrameType::kOpHeader : rr::FrameType::kData);
    for (int i = 0; i < 64 && link.recvsDone() == 0; ++i) link.progress();
    if (header && link.recvsDone() == 1) rr::GroupHeader::decode(buf.data(), 1);
  } catch (const rr::Error&) {
  }
  return 0;
}

// Standalone Asio, compiled once for the whole library (ASIO_SEPARATE_COMPILATION): every
// other file that uses Asio (only rendezvous.cc) includes its headers without the
// implementation, which costs about 15 s of compile time per file.
#include <asio/impl/src.hpp>

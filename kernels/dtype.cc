// Names and sizes of the public dtype and op enums, in one table each.
#include "kernels/dtype.h"

namespace rr {
namespace {

struct DtypeInfo {
  const char* name;
  size_t size;
  bool isFloat;
};

constexpr DtypeInfo kDtypes[kNumDtypes] = {
    {"float", 4, true},  {"double", 8, true}, {"half", 2, true},   {"bfloat16", 2, true},
    {"int8", 1, false},  {"uint8", 1, false}, {"int32", 4, false}, {"uint32", 4, false},
    {"int64", 8, false}, {"uint64", 8, false},
};

constexpr const char* kOps[kNumOps] = {"sum", "prod", "min", "max", "avg"};

}  // namespace

bool dtypeValid(int dtype) { return dtype >= 0 && dtype < kNumDtypes; }
bool opValid(int op) { return op >= 0 && op < kNumOps; }
size_t dtypeSize(rr_dtype_t dtype) { return kDtypes[dtype].size; }
bool dtypeIsFloat(rr_dtype_t dtype) { return kDtypes[dtype].isFloat; }
const char* dtypeName(rr_dtype_t dtype) {
  return dtypeValid(dtype) ? kDtypes[dtype].name : "invalid";
}
const char* opName(rr_op_t op) { return opValid(op) ? kOps[op] : "invalid"; }

std::optional<rr_dtype_t> parseDtype(std::string_view name) {
  for (int i = 0; i < kNumDtypes; ++i)
    if (name == kDtypes[i].name) return static_cast<rr_dtype_t>(i);
  if (name == "float32" || name == "fp32") return RR_FLOAT32;
  if (name == "float64" || name == "fp64") return RR_FLOAT64;
  if (name == "float16" || name == "fp16") return RR_FLOAT16;
  if (name == "bf16") return RR_BFLOAT16;
  return std::nullopt;
}

std::optional<rr_op_t> parseOp(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (name == kOps[i]) return static_cast<rr_op_t>(i);
  return std::nullopt;
}

}  // namespace rr

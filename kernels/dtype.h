// Element types and reduction operators: sizes, names, parsing. The fp16/bf16 conversions
// are in half.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ringreduce/ringreduce.h"

namespace rr {

constexpr int kNumDtypes = 10;
constexpr int kNumOps = 5;

bool dtypeValid(int dtype);
bool opValid(int op);
size_t dtypeSize(rr_dtype_t dtype);
bool dtypeIsFloat(rr_dtype_t dtype);
// nccl-tests names: float, double, half, bfloat16, int8, uint8, int32, uint32, int64, uint64.
const char* dtypeName(rr_dtype_t dtype);
const char* opName(rr_op_t op);  // sum, prod, min, max, avg
std::optional<rr_dtype_t> parseDtype(std::string_view name);
std::optional<rr_op_t> parseOp(std::string_view name);

}  // namespace rr

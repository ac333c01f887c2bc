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
// The value of a float element at p as a double (0 for integer dtypes); for checks.
double floatValueAt(const void* p, rr_dtype_t dtype);
// Elements equal bit for bit, except a float RR_AVG, which scales each input by 1/n before
// the sum (reduce.h) and may differ from sum-then-divide by its rounding: then within a
// relative tolerance of the dtype's precision. For checks of results.
bool sameResult(const void* got, const void* want, size_t count, rr_dtype_t dtype, rr_op_t op);

}  // namespace rr

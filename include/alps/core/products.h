#pragma once
// fp32 matrix products at the tensor-core rate with fp32's accuracy. A GPU's fp32 products run on its general cores
// (an H100: 52 TFLOP/s); its TF32 tensor cores run 7x faster (366-379 TFLOP/s, docs/benchmarks.md, GPU) but read
// only 11 significant bits of each input. Split each operand into two TF32 numbers, x = hi + lo (hi: x rounded to 11
// bits; lo: the rest, rounded to 11 bits), and A B = Ahi Bhi + Ahi Blo + Alo Bhi + Alo Blo: every product of two
// TF32 numbers is exact in fp32, and the last term, at most 2^-22 of |A||B|, is dropped. Three tensor-core products
// then give each term to 3 * 2^-22 of |a_ik b_kj| (fp32's own rounding of a term: 2^-24), summed in fp32 as the
// native product sums: the same accuracy to within the sums' rounding (sqrt(k) 2^-24 at least), 2.4x faster.
#include <ATen/core/Tensor.h>

#include <string>

namespace alps {

/// How fp32 products run. kNative: the device's fp32 product. kSplitTf32: three TF32 products of split operands
/// (above), on a CUDA device through cuBLAS's TF32 compute; on the CPU the same split products in fp32 (each exact
/// there too): slower than native, for checking the arithmetic without a GPU.
enum class Fp32Products { kNative, kSplitTf32 };

/// "auto" (kSplitTf32 on a CUDA device whose tensor cores take TF32, compute capability 8.0 on, else kNative),
/// "fp32" (kNative) or "tf32x3" (kSplitTf32); anything else is an error naming `what`.
Fp32Products fp32_products_for(const std::string& name, const at::Device& device, const std::string& what);

/// x rounded to the nearest TF32 number (11 significant bits, ties away from zero), as fp32: hi of the split.
at::Tensor round_to_tf32(const at::Tensor& x);

/// An fp32 matrix as the left operand of products, split once when it serves many (a factor, an inverse, Hn). Views
/// (narrow, t) share the split.
class Fp32Matrix {
 public:
  Fp32Matrix() = default;
  Fp32Matrix(const at::Tensor& A, Fp32Products how);
  /// Room for the split of X, filled rows at a time by store_rows as X's rows are computed (a native one is X).
  static Fp32Matrix rows_of(const at::Tensor& X, Fp32Products how);
  /// Splits rows [start, start + length) of X (rows_of's X) into this matrix.
  void store_rows(const at::Tensor& X, int64_t start, int64_t length);
  Fp32Matrix narrow(int64_t dim, int64_t start, int64_t length) const;
  Fp32Matrix t() const;
  int64_t size(int64_t dim) const { return hi_.size(dim); }
  Fp32Products how() const { return lo_.defined() ? Fp32Products::kSplitTf32 : Fp32Products::kNative; }

  /// C = beta M + alpha A B (M may be C itself; beta = 0 ignores M). B is split as A is.
  void addmm_out(at::Tensor& C, const at::Tensor& M, const Fp32Matrix& B, double beta, double alpha) const;
  /// The same with B split at this call when A is split.
  void addmm_out(at::Tensor& C, const at::Tensor& M, const at::Tensor& B, double beta, double alpha) const {
    addmm_out(C, M, Fp32Matrix(B, how()), beta, alpha);
  }
  /// C = A B.
  void mm_out(at::Tensor& C, const at::Tensor& B) const { addmm_out(C, C, B, 0.0, 1.0); }
  void mm_out(at::Tensor& C, const Fp32Matrix& B) const { addmm_out(C, C, B, 0.0, 1.0); }

 private:
  at::Tensor hi_, lo_;  // native: hi_ is A itself, lo_ undefined
};

namespace detail {
/// C = beta C + alpha A B for fp32 CUDA tensors A, B whose entries are TF32 numbers, on the tensor cores with fp32
/// sums (cuBLAS's TF32 compute; products_gpu.cc; a build without CUDA has no such tensors).
void tf32_gemm(at::Tensor& C, const at::Tensor& A, const at::Tensor& B, double beta, double alpha);
/// Whether `device` multiplies TF32 numbers on its matrix units (kSplitTf32's premise).
bool has_tf32_products(const at::Device& device);
}  // namespace detail

}  // namespace alps

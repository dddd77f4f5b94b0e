// CdgtLeadingSplit: a sparse batch's first n columns as a dense [B, n] block, and its other entries as a sparse batch
// of width - n columns (their column ids less n), in one pass over the entries (compiled on first use by
// cdgt_keras/kernels.py; cdgt_keras/sparse.py wraps it and falls back to tf.sparse.slice and tf.sparse.to_dense, the
// reference).
//
// A text's sentence embedding fills the first columns of every row (debtags: 768 of a row's 858 entries); the
// encoder multiplies them as a dense block and the other columns through their posting rows. TensorFlow's
// SparseSlice, run once for each side, and SparseToDense took about 6.7 ms of a 38 ms training step; this reads the
// entries once. The block's absent entries are 0; an entry repeated (a non-canonical batch) adds, as a product does.
#include <algorithm>
#include <cstdint>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace cdgt {
using namespace tensorflow;  // NOLINT

REGISTER_OP("CdgtLeadingSplit")
    .Input("indices: int64")
    .Input("values: float")
    .Input("dense_shape: int64")
    .Attr("n: int >= 0")
    .Output("block: float")
    .Output("rest_indices: int64")
    .Output("rest_values: float")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      int64_t n;
      TF_RETURN_IF_ERROR(c->GetAttr("n", &n));
      c->set_output(0, c->Matrix(c->UnknownDim(), n));
      c->set_output(1, c->Matrix(c->UnknownDim(), 2));
      c->set_output(2, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc("block [B, n]: the entries of columns < n; rest: the others, their columns less n, in their order.");

class LeadingSplitOp : public OpKernel {
 public:
  explicit LeadingSplitOp(OpKernelConstruction* c) : OpKernel(c) { OP_REQUIRES_OK(c, c->GetAttr("n", &n_)); }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& indices = ctx->input(0);
    const Tensor& values = ctx->input(1);
    const Tensor& shape = ctx->input(2);
    OP_REQUIRES(ctx, indices.dims() == 2 && indices.dim_size(1) == 2,
                errors::InvalidArgument("indices must be [nnz, 2], got ", indices.shape().DebugString()));
    OP_REQUIRES(ctx, values.dims() == 1 && values.dim_size(0) == indices.dim_size(0),
                errors::InvalidArgument("values must be [nnz], got ", values.shape().DebugString()));
    OP_REQUIRES(ctx, shape.dims() == 1 && shape.NumElements() == 2, errors::InvalidArgument("dense_shape must be [2]"));
    const int64_t rows = shape.flat<int64_t>()(0), width = shape.flat<int64_t>()(1), nnz = values.dim_size(0);
    OP_REQUIRES(ctx, n_ <= width, errors::InvalidArgument("n = ", n_, " is more than the batch's ", width, " columns"));
    const auto at = indices.matrix<int64_t>();
    const auto v = values.flat<float>();
    int64_t lead = 0;
    for (int64_t e = 0; e < nnz; ++e) {
      const int64_t r = at(e, 0), c = at(e, 1);
      OP_REQUIRES(ctx, r >= 0 && r < rows && c >= 0 && c < width,
                  errors::InvalidArgument("entry ", e, " at [", r, ", ", c, "] is outside the batch's shape [", rows,
                                          ", ", width, "]"));
      lead += c < n_;
    }
    Tensor* block = nullptr;
    Tensor* rest_indices = nullptr;
    Tensor* rest_values = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({rows, n_}), &block));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({nnz - lead, 2}), &rest_indices));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({nnz - lead}), &rest_values));
    float* b = block->flat<float>().data();
    std::fill(b, b + rows * n_, 0.0f);
    auto ri = rest_indices->matrix<int64_t>();
    auto rv = rest_values->flat<float>();
    int64_t k = 0;
    for (int64_t e = 0; e < nnz; ++e) {
      const int64_t r = at(e, 0), c = at(e, 1);
      if (c < n_) {
        b[r * n_ + c] += v(e);
      } else {
        ri(k, 0) = r;
        ri(k, 1) = c - n_;
        rv(k) = v(e);
        ++k;
      }
    }
  }

 private:
  int64_t n_;
};

REGISTER_KERNEL_BUILDER(Name("CdgtLeadingSplit").Device(DEVICE_CPU), LeadingSplitOp);

}  // namespace cdgt

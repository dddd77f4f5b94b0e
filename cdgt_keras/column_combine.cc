// CdgtColumnCombine: out[b, order[i]] = sum over e in [splits[i], splits[i+1]) of weights[e] * x[b, cols[e]], row by row
// (compiled on first use by cdgt_keras/kernels.py; cdgt_keras/columns.py wraps it, with its gradient, and falls back
// to tf.sparse.sparse_dense_matmul, the reference).
//
// The players' fusion and the game's selections are products of a [B, C] batch with a static sparse [C, J] table
// that holds a few entries per column j. TensorFlow multiplies a dense matrix by a sparse one through two
// transposed copies of the batch; this kernel reads each row of the batch in place (a row of 21k floats stays in
// cache) and adds each column's entries in their order, starting from 0, as TensorFlow's kernel does. `order` lists the
// output columns grouped by how many entries they take, so that the loop over a column's entries runs the same number
// of times from one column to the next (a varying count, 1 or 2 at random, cost a branch misprediction a column).
#include <cstdint>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

namespace cdgt {
using namespace tensorflow;  // NOLINT

REGISTER_OP("CdgtColumnCombine")
    .Input("x: float")
    .Input("splits: int64")
    .Input("cols: int32")
    .Input("weights: float")
    .Input("order: int32")
    .Output("out: float")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle x, splits;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &splits));
      shape_inference::DimensionHandle width;
      TF_RETURN_IF_ERROR(c->Subtract(c->Dim(splits, 0), 1, &width));
      c->set_output(0, c->Matrix(c->Dim(x, 0), width));
      return absl::OkStatus();
    })
    .Doc("out[b, order[i]] = sum of weights[e] * x[b, cols[e]] over e in [splits[i], splits[i+1]).");

class ColumnCombineOp : public OpKernel {
 public:
  explicit ColumnCombineOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& splits = ctx->input(1);
    const Tensor& cols = ctx->input(2);
    const Tensor& weights = ctx->input(3);
    const Tensor& order = ctx->input(4);
    OP_REQUIRES(ctx, x.dims() == 2, errors::InvalidArgument("x must be a matrix, got ", x.shape().DebugString()));
    OP_REQUIRES(ctx, splits.dims() == 1 && splits.NumElements() >= 1,
                errors::InvalidArgument("splits must be a non-empty vector"));
    OP_REQUIRES(ctx, cols.dims() == 1 && weights.dims() == 1 && cols.NumElements() == weights.NumElements(),
                errors::InvalidArgument("cols and weights must be vectors of one length"));
    const int64_t rows = x.dim_size(0), width = x.dim_size(1), out_width = splits.NumElements() - 1;
    const int64_t entries = cols.NumElements();
    const auto s = splits.flat<int64_t>();
    const auto k = cols.flat<int32>();
    OP_REQUIRES(ctx, s(0) == 0 && s(out_width) == entries,
                errors::InvalidArgument("splits must run from 0 to len(cols) = ", entries));
    for (int64_t j = 0; j < out_width; ++j) {
      OP_REQUIRES(ctx, s(j) <= s(j + 1), errors::InvalidArgument("splits must not decrease (at ", j, ")"));
    }
    OP_REQUIRES(ctx, order.dims() == 1 && order.NumElements() == out_width,
                errors::InvalidArgument("order must be a vector of len(splits) - 1 = ", out_width, " columns"));
    const auto o = order.flat<int32>();
    std::vector<bool> seen(out_width, false);
    for (int64_t i = 0; i < out_width; ++i) {
      OP_REQUIRES(ctx, o(i) >= 0 && o(i) < out_width && !seen[o(i)],
                  errors::InvalidArgument("order must name each column of [0, ", out_width, ") once (at ", i, ")"));
      seen[o(i)] = true;
    }
    for (int64_t e = 0; e < entries; ++e) {
      OP_REQUIRES(ctx, k(e) >= 0 && k(e) < width,
                  errors::InvalidArgument("cols[", e, "] = ", k(e), " is not in [0, ", width, ")"));
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({rows, out_width}), &out));
    const float* p_x = x.flat<float>().data();
    const float* w = weights.flat<float>().data();
    const int64_t* p_s = s.data();
    const int32* p_k = k.data();
    const int32* p_o = o.data();
    float* p_out = out->flat<float>().data();
    // Runs of columns with one count of entries: 1 and 2 (every column of the fusion and the selections) have loops
    // of their own, free of a branch per entry; a larger count takes the general loop.
    std::vector<int64_t> runs;  // starts of runs of equal count, then out_width
    for (int64_t i = 0; i < out_width; ++i) {
      if (i == 0 || p_s[i + 1] - p_s[i] != p_s[i] - p_s[i - 1]) runs.push_back(i);
    }
    runs.push_back(out_width);
    auto combine = [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const float* row = p_x + b * width;
        float* target = p_out + b * out_width;
        for (size_t r = 0; r + 1 < runs.size(); ++r) {
          const int64_t first = runs[r], last = runs[r + 1], count = p_s[first + 1] - p_s[first];
          if (count == 0) {
            for (int64_t i = first; i < last; ++i) target[p_o[i]] = 0.0f;
          } else if (count == 1) {
            for (int64_t i = first; i < last; ++i) {
              const int64_t e = p_s[i];
              target[p_o[i]] = 0.0f + w[e] * row[p_k[e]];
            }
          } else if (count == 2) {
            for (int64_t i = first; i < last; ++i) {
              const int64_t e = p_s[i];
              float sum = 0.0f + w[e] * row[p_k[e]];
              sum += w[e + 1] * row[p_k[e + 1]];
              target[p_o[i]] = sum;
            }
          } else {
            for (int64_t i = first; i < last; ++i) {
              float sum = 0.0f;
              for (int64_t e = p_s[i]; e < p_s[i + 1]; ++e) sum += w[e] * row[p_k[e]];
              target[p_o[i]] = sum;
            }
          }
        }
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    Shard(workers->NumThreads(), workers, rows, 4 * (entries + out_width), combine);
  }
};

REGISTER_KERNEL_BUILDER(Name("CdgtColumnCombine").Device(DEVICE_CPU), ColumnCombineOp);
}  // namespace cdgt

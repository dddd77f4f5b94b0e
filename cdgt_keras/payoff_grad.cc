// CdgtPayoffGrad: the gradient of the shipped preset's payoff and rarity parts with respect to the fused probabilities,
// in one pass (compiled on first use by cdgt_keras/kernels.py; cdgt_keras/payoff_grad.py wraps it, and TensorFlow's
// own gradient of the same formulas is the fallback and the reference).
//
// The payoff R = -mean(BCE(y, clip(f))) and the rarity parts r_i = mean_b(sum_l m_il * w_l * y * log(clip(f))) / L
// take about twenty element-wise kernels backward, each a pass over the [B, L] batch (clip's gradient alone is two
// comparisons, two zero fills and two selections). For each element, in the order and float32 arithmetic of
// TensorFlow's gradient ops:
//   keep = lo <= f <= hi                                      (clip's gradient: Minimum's, then Maximum's)
//   s1   = keep ? (g_a * y) * (1 / f) + -((g_a * (1 - y)) * (1 / (1 - f))) : 0   (the payoff's BCE through both logs)
//   s2   = keep ? ((c_l * y) * (1 / f)) : 0                  (the rarity parts, c_l = (sum_i g_i m_il) * w_l)
//   out  = s1 + s2
// where g_a is the gradient reaching each element of the BCE's sum and g_i each row of player i's rarity part
// (both the same on every element: scalars), and the sum over players runs in player order. The reciprocals are
// IEEE divisions, the same on every element and machine; TensorFlow's Reciprocal approximates them on all but the
// last elements of a vectorised pass (within one float32 ulp), so its bits depend on where an element falls in
// the tensor, and a block of the labels (cdgt_keras/turns.py) would not get the whole's.
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

namespace cdgt {
using namespace tensorflow;  // NOLINT

REGISTER_OP("CdgtPayoffGrad")
    .Input("fused: float")
    .Input("labels: float")
    .Input("rarity: float")
    .Input("masks: float")
    .Input("scale: float")
    .Input("player_scale: float")
    .Input("players: bool")
    .Attr("lo: float")
    .Attr("hi: float")
    .Output("grad: float")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle fused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &fused));
      c->set_output(0, fused);
      return absl::OkStatus();
    })
    .Doc("The gradient of the BCE payoff and the log-scoring rarity parts with respect to the fused probabilities.");

class PayoffGradOp : public OpKernel {
 public:
  explicit PayoffGradOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("lo", &lo_));
    OP_REQUIRES_OK(c, c->GetAttr("hi", &hi_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& fused = ctx->input(0);
    const Tensor& masks = ctx->input(3);
    const Tensor& player_scale = ctx->input(5);
    const Tensor& players = ctx->input(6);
    OP_REQUIRES(ctx, fused.dims() == 2, errors::InvalidArgument("fused must be a matrix, got ",
                                                                 fused.shape().DebugString()));
    OP_REQUIRES(ctx, ctx->input(1).shape() == fused.shape(),
                errors::InvalidArgument("labels must have the fused probabilities' shape ", fused.shape().DebugString(),
                                        ", got ", ctx->input(1).shape().DebugString()));
    const int64_t rows = fused.dim_size(0), width = fused.dim_size(1);
    OP_REQUIRES(ctx, ctx->input(2).dims() == 1 && ctx->input(2).dim_size(0) == width,
                errors::InvalidArgument("rarity must be a vector of ", width, " weights"));
    OP_REQUIRES(ctx, masks.dims() == 2 && masks.dim_size(1) == width,
                errors::InvalidArgument("masks must be [players, ", width, "]"));
    const int64_t n = masks.dim_size(0);
    OP_REQUIRES(ctx, player_scale.NumElements() == n && players.NumElements() == n,
                errors::InvalidArgument("player_scale and players must hold one value per player (", n, ")"));
    OP_REQUIRES(ctx, ctx->input(4).NumElements() == 1, errors::InvalidArgument("scale must be a scalar"));

    // c_l = (sum over the live players of g_i * m_il) * w_l: the same on every row, so computed once.
    const float* m = masks.flat<float>().data();
    const float* w = ctx->input(2).flat<float>().data();
    const float* g = player_scale.flat<float>().data();
    const bool* live = players.flat<bool>().data();
    std::vector<float> c(width, 0.0f);
    bool any = false;
    for (int64_t l = 0; l < width; ++l) {
      bool first = true;
      float sum = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        if (!live[i]) continue;
        const float term = g[i] * m[i * width + l];
        sum = first ? term : sum + term;
        first = false;
      }
      if (!first) c[l] = sum * w[l];
      any = any || !first;
    }

    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, fused.shape(), &out));
    const float* f = fused.flat<float>().data();
    const float* y = ctx->input(1).flat<float>().data();
    const float ga = ctx->input(4).flat<float>()(0);
    const float lo = lo_, hi = hi_;
    const float* cl = c.data();
    float* o = out->flat<float>().data();
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const int64_t base = b * width;
        for (int64_t l = 0; l < width; ++l) {
          const int64_t j = base + l;
          const float fv = f[j], yv = y[j];
          const bool keep = fv >= lo && fv <= hi;  // false for NaN, as TensorFlow's comparisons
          const float ip = 1.0f / fv, iq = 1.0f / (1.0f - fv);
          const float s1 = (ga * yv) * ip + -((ga * (1.0f - yv)) * iq);
          const float kept1 = keep ? s1 : 0.0f;
          if (any) {
            const float kept2 = keep ? (cl[l] * yv) * ip : 0.0f;
            o[j] = kept1 + kept2;
          } else {
            o[j] = kept1;
          }
        }
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    Shard(workers->NumThreads(), workers, rows, 12 * width, run);
  }

 private:
  float lo_ = 0.0f, hi_ = 1.0f;
};

REGISTER_KERNEL_BUILDER(Name("CdgtPayoffGrad").Device(DEVICE_CPU), PayoffGradOp);
}  // namespace cdgt

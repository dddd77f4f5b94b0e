// CdgtPayoffValues: the shipped preset's payoff and rarity parts at the fused probabilities, in one pass (compiled on
// first use by cdgt_keras/kernels.py; cdgt_keras/payoff_grad.py calls it for the values whose gradient
// CdgtPayoffGrad gives, and TensorFlow's ops on the same formulas are the fallback and the reference).
//
// With p = clip(f, lo, hi) and q = 1 - p:
//   payoff R  = mean over the [B, L] batch of (y log p + (1 - y) log q)        (= -mean(BCE))
//   parts r_i = (mean over the rows of sum_l m_il * w_l * y * log p) / L        (each live player i; 0 otherwise)
// TensorFlow computes them in about twenty element-wise passes over the batch (clip's two, two logs, the products)
// and float32 reductions. Here one pass per row: log q through Eigen's vectorised log (TensorFlow's Log op is the
// same function), log p only where y is not 0 (a batch's labels are mostly 0), each row's sums in double, the
// rows then added in row order: the same result for any thread count, within float32 rounding of TensorFlow's.
// No gradient reads these values (CdgtPayoffGrad gives it from f and y), so a training step's updates keep their
// bits; only the logged figures move, in their last place.
#include <cmath>
#include <vector>

#include "Eigen/Core"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

namespace cdgt {
using namespace tensorflow;  // NOLINT

REGISTER_OP("CdgtPayoffValues")
    .Input("fused: float")
    .Input("labels: float")
    .Input("rarity: float")
    .Input("masks: float")
    .Input("players: bool")
    .Attr("lo: float")
    .Attr("hi: float")
    .Output("payoff: float")
    .Output("parts: float")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle fused, masks;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &fused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 2, &masks));
      c->set_output(0, c->Scalar());
      c->set_output(1, c->Vector(c->Dim(masks, 0)));
      return absl::OkStatus();
    })
    .Doc("The BCE payoff and the log-scoring rarity parts at the fused probabilities, in one pass.");

class PayoffValuesOp : public OpKernel {
 public:
  explicit PayoffValuesOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("lo", &lo_));
    OP_REQUIRES_OK(c, c->GetAttr("hi", &hi_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& fused = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    const Tensor& rarity = ctx->input(2);
    const Tensor& masks = ctx->input(3);
    const Tensor& players = ctx->input(4);
    OP_REQUIRES(ctx, fused.dims() == 2, errors::InvalidArgument("fused must be a matrix, got ",
                                                                 fused.shape().DebugString()));
    OP_REQUIRES(ctx, labels.shape() == fused.shape(),
                errors::InvalidArgument("labels must have the fused probabilities' shape ",
                                        fused.shape().DebugString(), ", got ", labels.shape().DebugString()));
    const int64_t rows = fused.dim_size(0), width = fused.dim_size(1);
    OP_REQUIRES(ctx, rarity.dims() == 1 && rarity.dim_size(0) == width,
                errors::InvalidArgument("rarity must be a vector of ", width, " weights"));
    OP_REQUIRES(ctx, masks.dims() == 2 && masks.dim_size(1) == width,
                errors::InvalidArgument("masks must be [players, ", width, "]"));
    const int64_t n = masks.dim_size(0);
    OP_REQUIRES(ctx, players.NumElements() == n,
                errors::InvalidArgument("players must hold one value per player (", n, ")"));

    const float* f = fused.flat<float>().data();
    const float* y = labels.flat<float>().data();
    const float* w = rarity.flat<float>().data();
    const float* m = masks.flat<float>().data();
    const bool* live = players.flat<bool>().data();
    const float lo = lo_, hi = hi_;
    std::vector<double> row_payoff(rows, 0.0), row_parts(rows * n, 0.0);
    auto run = [&](int64_t begin, int64_t end) {
      std::vector<float> log_q(width);
      for (int64_t b = begin; b < end; ++b) {
        const float* fr = f + b * width;
        const float* yr = y + b * width;
        for (int64_t l = 0; l < width; ++l) {
          const float fv = fr[l];
          const float p = fv < lo ? lo : (fv > hi ? hi : fv);  // NaN stays NaN, as TensorFlow's clip
          log_q[l] = 1.0f - p;
        }
        Eigen::Map<Eigen::ArrayXf> q(log_q.data(), width);
        q = q.log();
        // Every cell as if y were 0, then the cells where it is not corrected: the sum is one vectorised pass.
        double total = q.cast<double>().sum();
        double* parts = row_parts.data() + b * n;
        for (int64_t l = 0; l < width; ++l) {
          const float yv = yr[l];
          if (yv == 0.0f) continue;
          const float fv = fr[l];
          const float p = fv < lo ? lo : (fv > hi ? hi : fv);
          const double log_p = std::log(static_cast<double>(p));
          const double lq = static_cast<double>(log_q[l]);
          total += (yv * log_p + (1.0 - yv) * lq) - lq;
          const double weighted = static_cast<double>(w[l]) * yv * log_p;
          for (int64_t i = 0; i < n; ++i) {
            if (live[i]) parts[i] += static_cast<double>(m[i * width + l]) * weighted;
          }
        }
        row_payoff[b] = total;
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    Shard(workers->NumThreads(), workers, rows, 20 * width, run);

    double payoff = 0.0;
    std::vector<double> parts(n, 0.0);
    for (int64_t b = 0; b < rows; ++b) {
      payoff += row_payoff[b];
      for (int64_t i = 0; i < n; ++i) parts[i] += row_parts[b * n + i];
    }
    Tensor* out_payoff = nullptr;
    Tensor* out_parts = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out_payoff));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({n}), &out_parts));
    const double cells = static_cast<double>(rows) * static_cast<double>(width);
    out_payoff->scalar<float>()() = static_cast<float>(payoff / cells);
    auto out = out_parts->flat<float>();
    for (int64_t i = 0; i < n; ++i) {
      out(i) = live[i] ? static_cast<float>(parts[i] / static_cast<double>(rows) / static_cast<double>(width)) : 0.0f;
    }
  }

 private:
  float lo_ = 0.0f, hi_ = 1.0f;
};

REGISTER_KERNEL_BUILDER(Name("CdgtPayoffValues").Device(DEVICE_CPU), PayoffValuesOp);
}  // namespace cdgt

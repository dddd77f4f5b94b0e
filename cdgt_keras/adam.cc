// cdgt's Adam kernels (compiled on first use by cdgt_keras/kernels.py; the TensorFlow ops of
// cdgt_keras.sparse.LazyAdam and of keras.optimizers.Adam are the fallbacks and the references).
//
// CdgtLazyAdamRows: Adam on the rows a sparse gradient names, in one pass over them.
//
// For each named row r (each once) and column j, in the order and float32 arithmetic of LazyAdam's ops:
//   m[r,j] = beta_1 * m[r,j] + (1 - beta_1) * g[i,j]
//   v[r,j] = beta_2 * v[r,j] + (1 - beta_2) * (g[i,j] * g[i,j])
//   var[r,j] -= alpha * m[r,j] / (sqrt(v[r,j]) + epsilon)
// TensorFlow has fused sparse kernels for Adagrad, RMSProp, FTRL and momentum, not for Adam; LazyAdam's ops make a
// dozen passes over the rows (gathers, element-wise kernels, three scatters), this kernel one.
//
// CdgtAdamDense: Keras' Adam on a whole variable in one pass (cdgt_keras.sparse.LazyAdam's dense gradients).
// For each element, in the order and float32 arithmetic of keras.optimizers.Adam.update_step:
//   m   = m + (g - m) * keep_1                        (keep_1 = 1 - beta_1, rounded to float32 as Keras does)
//   v   = v + (g * g - v) * keep_2
//   var = var - (m * alpha) / (sqrt(v) + epsilon)
// Keras runs these as about ten element-wise kernels, each a pass over the variable; the players' output layers
// ([512, 7k] each on deps) made them a tenth of a training step.
#include <cmath>
#include <cstring>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

namespace cdgt {
using namespace tensorflow;  // NOLINT

REGISTER_OP("CdgtLazyAdamRows")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("rows: Tindices")
    .Input("grad: float")
    .Input("alpha: float")
    .Input("beta_1: float")
    .Input("beta_2: float")
    .Input("epsilon: float")
    .Attr("Tindices: {int32, int64}")
    .SetIsStateful()  // it writes variables: never pruned, folded or reordered past their other reads and writes
    .SetShapeFn([](shape_inference::InferenceContext*) { return absl::OkStatus(); })
    .Doc("Adam on the named rows (each named once) of var, m and v, in place, in one pass.");

// The variable's buffer, copied first if anything else holds it (a read may alias a variable's value: writing in
// place would change what the reader holds).
static absl::Status SoleBuffer(OpKernelContext* ctx, Var* var, Tensor** out) {
  Tensor* t = var->tensor();
  if (!t->RefCountIsOne()) {
    Tensor copy;
    TF_RETURN_IF_ERROR(ctx->allocate_temp(t->dtype(), t->shape(), &copy));
    std::memcpy(copy.data(), t->data(), t->TotalBytes());
    *t = copy;
  }
  *out = t;
  return absl::OkStatus();
}

static float Scalar(OpKernelContext* ctx, int input) { return ctx->input(input).scalar<float>()(); }

// An Adam op: var, m and v (inputs 0-2) looked up, locked, made its own (SoleBuffer) and checked to be float32 of
// one shape, then handed to Update.
class AdamOp : public OpKernel {
 public:
  explicit AdamOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    core::RefCountPtr<Var> var, m, v;
    OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 0), &var));
    OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 1), &m));
    OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 2), &v));
    mutex_lock lock_var(*var->mu()), lock_m(*m->mu()), lock_v(*v->mu());
    Tensor *t_var, *t_m, *t_v;
    OP_REQUIRES_OK(ctx, SoleBuffer(ctx, var.get(), &t_var));
    OP_REQUIRES_OK(ctx, SoleBuffer(ctx, m.get(), &t_m));
    OP_REQUIRES_OK(ctx, SoleBuffer(ctx, v.get(), &t_v));
    OP_REQUIRES(ctx, t_var->dtype() == DT_FLOAT && t_m->dtype() == DT_FLOAT && t_v->dtype() == DT_FLOAT &&
                         t_m->shape() == t_var->shape() && t_v->shape() == t_var->shape(),
                errors::InvalidArgument("var, m and v must be float32 of one shape, got ", t_var->DebugString()));
    Update(ctx, t_var, t_m, t_v);
  }

 protected:
  virtual void Update(OpKernelContext* ctx, Tensor* t_var, Tensor* t_m, Tensor* t_v) = 0;
};

template <typename Index>
class LazyAdamRowsOp : public AdamOp {
 public:
  explicit LazyAdamRowsOp(OpKernelConstruction* c) : AdamOp(c) {}

 protected:
  void Update(OpKernelContext* ctx, Tensor* t_var, Tensor* t_m, Tensor* t_v) override {
    OP_REQUIRES(ctx, t_var->dims() == 2, errors::InvalidArgument("var must be a matrix, got ", t_var->DebugString()));
    const Tensor& rows = ctx->input(3);
    const Tensor& grad = ctx->input(4);
    const int64_t n = rows.NumElements(), height = t_var->dim_size(0), width = t_var->dim_size(1);
    OP_REQUIRES(ctx, rows.dims() == 1, errors::InvalidArgument("rows must be a vector"));
    OP_REQUIRES(ctx, grad.dims() == 2 && grad.dim_size(0) == n && grad.dim_size(1) == width,
                errors::InvalidArgument("grad must be [len(rows), ", width, "], got ", grad.shape().DebugString()));
    const auto r = rows.flat<Index>();
    for (int64_t i = 0; i < n; ++i) {
      OP_REQUIRES(ctx, r(i) >= 0 && r(i) < height,
                  errors::InvalidArgument("rows[", i, "] = ", r(i), " is not in [0, ", height, ")"));
    }
    const float alpha = Scalar(ctx, 5), beta_1 = Scalar(ctx, 6), beta_2 = Scalar(ctx, 7), epsilon = Scalar(ctx, 8);
    const float keep_1 = 1 - beta_1, keep_2 = 1 - beta_2;
    float* p_var = t_var->flat<float>().data();
    float* p_m = t_m->flat<float>().data();
    float* p_v = t_v->flat<float>().data();
    const float* p_g = grad.flat<float>().data();
    auto update = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t at = static_cast<int64_t>(r(i)) * width;
        const float* g = p_g + i * width;
        float *x = p_var + at, *a = p_m + at, *b = p_v + at;
        for (int64_t j = 0; j < width; ++j) {
          const float mj = beta_1 * a[j] + keep_1 * g[j];
          const float vj = beta_2 * b[j] + keep_2 * (g[j] * g[j]);
          a[j] = mj;
          b[j] = vj;
          x[j] -= alpha * mj / (std::sqrt(vj) + epsilon);
        }
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    Shard(workers->NumThreads(), workers, n, 8 * width, update);
  }
};

REGISTER_KERNEL_BUILDER(Name("CdgtLazyAdamRows").Device(DEVICE_CPU).TypeConstraint<int32>("Tindices"),
                        LazyAdamRowsOp<int32>);
REGISTER_KERNEL_BUILDER(Name("CdgtLazyAdamRows").Device(DEVICE_CPU).TypeConstraint<int64_t>("Tindices"),
                        LazyAdamRowsOp<int64_t>);

REGISTER_OP("CdgtAdamDense")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("grad: float")
    .Input("alpha: float")
    .Input("keep_1: float")
    .Input("keep_2: float")
    .Input("epsilon: float")
    .SetIsStateful()  // it writes variables: never pruned, folded or reordered past their other reads and writes
    .SetShapeFn([](shape_inference::InferenceContext*) { return absl::OkStatus(); })
    .Doc("Keras' Adam on every element of var, m and v, in place, in one pass.");

class AdamDenseOp : public AdamOp {
 public:
  explicit AdamDenseOp(OpKernelConstruction* c) : AdamOp(c) {}

 protected:
  void Update(OpKernelContext* ctx, Tensor* t_var, Tensor* t_m, Tensor* t_v) override {
    const Tensor& grad = ctx->input(3);
    OP_REQUIRES(ctx, grad.shape() == t_var->shape(),
                errors::InvalidArgument("grad must have var's shape ", t_var->shape().DebugString(), ", got ",
                                        grad.shape().DebugString()));
    const float alpha = ctx->input(4).scalar<float>()(), keep_1 = ctx->input(5).scalar<float>()();
    const float keep_2 = ctx->input(6).scalar<float>()(), epsilon = ctx->input(7).scalar<float>()();
    float* x = t_var->flat<float>().data();
    float* a = t_m->flat<float>().data();
    float* b = t_v->flat<float>().data();
    const float* g = grad.flat<float>().data();
    auto update = [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        const float mj = a[j] + (g[j] - a[j]) * keep_1;
        const float vj = b[j] + (g[j] * g[j] - b[j]) * keep_2;
        a[j] = mj;
        b[j] = vj;
        x[j] = x[j] - (mj * alpha) / (std::sqrt(vj) + epsilon);
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    Shard(workers->NumThreads(), workers, grad.NumElements(), 16, update);
  }
};

REGISTER_KERNEL_BUILDER(Name("CdgtAdamDense").Device(DEVICE_CPU), AdamDenseOp);
}  // namespace cdgt

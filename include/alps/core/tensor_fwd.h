#pragma once
// Forward declarations so that headers taking tensors by reference stay cheap to include.
namespace at {
class Tensor;
}
namespace c10 {
struct Device;
}

// Runs an ONNX model on inputs of ones through grove's public API and prints its outputs.
//   hello model.onnx [threads]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <grove/grove.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: hello MODEL.onnx [THREADS]\n");
    return 2;
  }
  try {
    grove::Engine engine({.threads = argc > 2 ? std::atoi(argv[2]) : 0});
    grove::Session session(engine, grove::Model::load(argv[1]));

    grove::TensorMap inputs;
    std::vector<std::vector<float>> storage;  // the inputs are borrowed: keep them alive
    for (const grove::ValueSpec& in : session.inputs()) {
      if (in.dtype != grove::DType::f32) throw grove::Error("hello feeds float32 inputs only, not " + in.name);
      grove::Shape shape;
      for (int64_t d : in.dims) shape.push_back(d < 0 ? 1 : d);  // dynamic dims: 1
      storage.emplace_back(static_cast<size_t>(grove::numel(shape)), 1.0f);
      inputs[in.name] = grove::Tensor::borrow(grove::DType::f32, shape, storage.back().data());
    }

    grove::TensorMap blocking = session.run(inputs);
    grove::TensorMap submitted = session.submit(inputs).get();
    for (const auto& [name, out] : blocking) {
      const grove::Tensor& again = submitted.at(name);
      bool same = out.bytes() == again.bytes() && std::equal(out.raw(), out.raw() + out.bytes(), again.raw());
      double sum = 0;
      for (double v : out.to_f64()) sum += v;
      std::printf("%s %s sum %.6g %s\n", name.c_str(), grove::shape_str(out.shape()).c_str(), sum,
                  same ? "run == submit" : "run != submit");
      if (!same) return 1;
    }
    return 0;
  } catch (const grove::Error& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return 1;
  }
}

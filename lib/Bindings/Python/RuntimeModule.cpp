//===- RuntimeModule.cpp - Python bindings of the offload runtime ---------===//
//
// Part of offload. The extension module `_offload_runtime` (pybind11): load a
// plan, create a session on a backend, bind numpy arrays to its inputs, run
// training steps, read the loss, outputs and the parameter store. The Python
// package `offload` (python/offload) builds on it; docs/python.md documents
// both.
//
// Errors: every runtime Status that is not ok becomes a Python exception
// `OffloadError` (a RuntimeError) carrying the runtime's one-line message;
// wrong argument types are TypeError/ValueError. Nothing here aborts the
// interpreter: the runtime itself never throws and returns errors.
//
// Copies (docs/python.md, "Copies and views"): an array bound to an *input*
// that is C-contiguous, aligned and of a runtime dtype is borrowed, not
// copied (the session keeps a reference to it and each step uploads its
// bytes as they are then); any other array, and every parameter, state or
// optimizer-state value (the store owns those), is copied once into the
// runtime's own Tensor. output()/get() return fresh copies; output_view()/
// get_view() return read-only numpy arrays viewing the runtime's tensors,
// which keep those bytes alive for as long as the view exists.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Plan.h"
#include "offload/Runtime/Communicator.h"
#include "offload/Runtime/Runtime.h"
#include "offload/Runtime/Tensor.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>

namespace py = pybind11;
using namespace offload::rt;

namespace {

/// The Python exception type of runtime errors (set at module import).
PyObject *offloadError = nullptr;

[[noreturn]] void raise(const std::string &message) {
  PyErr_SetString(offloadError, message.c_str());
  throw py::error_already_set();
}

void check(const Status &st) {
  if (!st.ok())
    raise(st.message());
}

const char *numpyDtype(DType dt) {
  switch (dt) {
  case DType::F32: return "float32";
  case DType::F64: return "float64";
  case DType::I64: return "int64";
  case DType::I32: return "int32";
  case DType::Bool: return "bool";
  case DType::F16: return "float16";
  // numpy has no bfloat16: its raw bits, as in .npz files (Npz.h).
  case DType::BF16: return "uint16";
  }
  return "?";
}

/// The runtime dtype of a numpy array's dtype; raises TypeError otherwise.
DType dtypeOf(const py::array &a, const std::string &what) {
  py::dtype d = a.dtype();
  if (d.is(py::dtype::of<float>()) || d.equal(py::dtype::of<float>()))
    return DType::F32;
  if (d.equal(py::dtype::of<double>()))
    return DType::F64;
  if (d.equal(py::dtype::of<int64_t>()))
    return DType::I64;
  if (d.equal(py::dtype::of<int32_t>()))
    return DType::I32;
  if (d.equal(py::dtype::of<bool>()))
    return DType::Bool;
  if (d.equal(py::dtype("float16")))
    return DType::F16;
  if (d.equal(py::dtype::of<uint16_t>()))
    return DType::BF16; // bfloat16 bits (Npz.h)
  throw py::type_error(what + ": numpy dtype " +
                       std::string(py::str(d)) +
                       " is not one the runtime has (float32, float64, "
                       "float16, int64, int32, bool, or uint16 holding "
                       "bfloat16 bits)");
}

// NumPy 2 moved the element size in its dtype struct (PyArray_Descr);
// pybind11 before 2.12 (Debian 12 has 2.10) reads it at NumPy 1's offset, so
// py::array::itemsize()/nbytes() and the constructors that derive strides
// from them are wrong under NumPy 2 (the PyTorch 2.x venv has NumPy 2). The
// bindings therefore never use them: element sizes come from the runtime's
// dtype (dtypeOf checked it) and new arrays get explicit strides. The array
// struct itself (data, shape, strides, flags) is the same in both.

/// C-order strides in bytes of `shape` with elements of `dt`.
std::vector<py::ssize_t> cStrides(const std::vector<py::ssize_t> &shape,
                                  DType dt) {
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t step = py::ssize_t(dtypeSize(dt));
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= shape[i];
  }
  return strides;
}

/// Copies a numpy array (any strides; converted to C order) into a Tensor.
Tensor toTensor(const py::handle &obj, const std::string &what) {
  py::array arr = py::array::ensure(obj, py::array::c_style);
  if (!arr)
    throw py::type_error(what + ": expected a numpy array (or an object with "
                                "the buffer protocol)");
  DType dt = dtypeOf(arr, what);
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  Tensor t(dt, shape);
  // numpy's own count (its Python attribute is right under NumPy 1 and 2).
  size_t nbytes = py::cast<size_t>(arr.attr("nbytes"));
  if (nbytes != t.byteSize())
    raise(what + ": array has " + std::to_string(nbytes) +
          " bytes, expected " + std::to_string(t.byteSize()));
  if (t.byteSize())
    std::memcpy(t.data(), arr.data(), t.byteSize());
  return t;
}

/// A Tensor borrowing a C-contiguous, aligned numpy array of a runtime dtype
/// (the tensor keeps a reference to the array), or an empty optional when
/// the array does not qualify (then it is copied).
bool borrowable(const py::handle &obj) {
  if (!py::isinstance<py::array>(obj))
    return false;
  py::array arr = py::reinterpret_borrow<py::array>(obj);
  int flags = py::detail::array_proxy(arr.ptr())->flags;
  const int need = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ |
                   py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  return (flags & need) == need;
}

Tensor borrowTensor(const py::handle &obj, const std::string &what) {
  py::array arr = py::reinterpret_borrow<py::array>(obj);
  DType dt = dtypeOf(arr, what);
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  // The owner holds a reference to the array; it may be released on a
  // thread without the GIL (a session destroyed by C++), so it takes it.
  auto *ref = new py::object(arr);
  std::shared_ptr<void> owner(ref, [](void *p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object *>(p);
  });
  return Tensor::borrow(dt, shape, const_cast<void *>(arr.data()),
                        std::move(owner));
}

/// A read-only numpy array viewing the bytes of `t`, which it keeps alive
/// (not the tensor: a view of a store value whose tensor is later replaced
/// still shows the bytes it was made of).
py::array viewArray(const Tensor &t) {
  py::dtype d(numpyDtype(t.dtype()));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  auto *keep = new std::shared_ptr<void>(t.keepAlive());
  py::capsule base(keep, [](void *p) {
    delete static_cast<std::shared_ptr<void> *>(p);
  });
  py::array out(d, shape, cStrides(shape, t.dtype()), t.data(), base);
  out.attr("flags").attr("writeable") = false;
  return out;
}

/// A fresh numpy array holding a copy of `t`.
py::array toArray(const Tensor &t) {
  py::dtype d(numpyDtype(t.dtype()));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array out(d, shape, cStrides(shape, t.dtype()));
  if (t.byteSize())
    std::memcpy(out.mutable_data(), t.data(), t.byteSize());
  return out;
}

py::dict bufferDict(const BufferDesc &b, int id) {
  py::dict d;
  d["id"] = id;
  d["name"] = b.name;
  d["dtype"] = numpyDtype(b.dtype);
  d["shape"] = py::tuple(py::cast(b.shape));
  d["space"] = memorySpaceName(b.space);
  d["offset"] = b.offset;
  d["size"] = b.size;
  d["role"] = bufferRoleName(b.role);
  d["live_first"] = b.liveFirst;
  d["live_last"] = b.liveLast;
  d["alias_of"] = b.aliasOf;
  return d;
}

using PlanPtr = std::shared_ptr<const Plan>;

/// A loaded plan (pybind11 holders cannot hold a pointer to const).
struct PyPlan {
  PlanPtr plan;
  const PlanData &data() const { return plan->data(); }
};

/// A session with the plan it runs (kept alive by the Python object).
struct PySession {
  PyPlan plan;
  std::unique_ptr<Session> session;
  /// Set while step() runs without the GIL: another Python thread touching
  /// the session then gets an OffloadError instead of a data race.
  std::atomic<bool> busy{false};
};

/// Marks `s` busy for its lifetime; raises when it already is.
struct BusyGuard {
  explicit BusyGuard(PySession &s) : s(s) {
    if (s.busy.exchange(true))
      raise("the session is running a step in another thread");
  }
  ~BusyGuard() { s.busy = false; }
  PySession &s;
};

} // namespace

PYBIND11_MODULE(_offload_runtime, m) {
  m.doc() = "Bindings of the offload runtime (docs/python.md). Use the "
            "package `offload` rather than this module directly.";

  static py::exception<std::runtime_error> exc(m, "OffloadError",
                                               PyExc_RuntimeError);
  offloadError = exc.ptr();

  m.def("available_backends", &availableBackends,
        "Backends compiled into this runtime: 'host', and 'cuda' when built "
        "with CUDA.");
  m.def(
      "missing_ops",
      [](const PyPlan &plan, const std::string &backend) {
        auto r = missingOps(*plan.plan, backend);
        if (!r)
          raise(r.message());
        return *r;
      },
      py::arg("plan"), py::arg("backend"),
      "Ops of `plan` that `backend` has no kernel for (empty: it can run "
      "the plan). Needs no device.");
  m.attr("PLAN_FORMAT_VERSION") = kPlanFormatVersion;

  py::class_<PyPlan>(m, "Plan",
                            "A loaded, verified and validated plan (.oflp).")
      .def_static(
          "load",
          [](const std::string &path) {
            auto p = Plan::load(path);
            if (!p)
              raise(p.message());
            return PyPlan{*p};
          },
          py::arg("path"),
          "Reads, verifies and validates a plan file; OffloadError names the "
          "problem (file, version, buffer or instruction).")
      .def_property_readonly(
          "device_capacity",
          [](const PyPlan &p) { return p.data().deviceCapacity; },
          "Bytes of the device arena (what a device must have).")
      .def_property_readonly(
          "host_capacity", [](const PyPlan &p) { return p.data().hostCapacity; },
          "Bytes of the host arena.")
      .def_property_readonly(
          "predicted_peak_device_bytes",
          [](const PyPlan &p) { return p.data().predictedPeakDeviceBytes; },
          "Peak bytes of live device buffers the plan predicts.")
      .def_property_readonly(
          "num_instructions",
          [](const PyPlan &p) { return p.data().instructions.size(); })
      .def_property_readonly(
          "producer", [](const PyPlan &p) { return p.data().producer; })
      .def_property_readonly(
          "phases",
          [](const PyPlan &p) {
            py::list out;
            for (const PhaseDesc &ph : p.data().phases)
              out.append(py::make_tuple(ph.name, ph.first, ph.last));
            return out;
          },
          "[(name, first, last)]: instruction range [first, last) per phase.")
      .def_property_readonly(
          "instructions",
          [](const PyPlan &p) {
            py::list out;
            for (const InstructionDesc &in : p.data().instructions) {
              py::dict d;
              d["op"] = in.op;
              d["inputs"] = in.inputs;
              d["outputs"] = in.outputs;
              d["stream"] = streamName(in.stream);
              out.append(d);
            }
            return out;
          },
          "Every instruction in program order as a dict: op (e.g. "
          "'offload.linear', 'offload.to_device'), inputs and outputs "
          "(buffer ids, -1 = absent optional operand), stream ('compute', "
          "'h2d' or 'd2h').")
      .def_property_readonly(
          "buffers",
          [](const PyPlan &p) {
            py::list out;
            const auto &bs = p.data().buffers;
            for (size_t i = 0; i < bs.size(); ++i)
              out.append(bufferDict(bs[i], int(i)));
            return out;
          },
          "Every buffer as a dict: id, name, dtype, shape, space ('device' "
          "or 'host'), offset and size (bytes), role, live_first and "
          "live_last (instruction indices, inclusive), alias_of (-1 or the "
          "buffer whose bytes it reuses).")
      .def(
          "dump", [](const PyPlan &p) { return p.plan->dump(); },
          "A readable listing of the plan.");

  py::class_<PySession>(m, "Session",
                        "One plan on one backend; one step at a time.")
      .def(py::init([](const PyPlan &plan, const std::string &backend,
                       uint64_t deviceBytes, int threads, bool poison,
                       double emulateLink, bool dataParallel) {
             SessionOptions opts;
             if (dataParallel) {
               // The launcher's environment (torchrun); none: one rank.
               bool found = false;
               auto co = communicatorOptionsFromEnvironment(found);
               if (!co)
                 raise(co.message());
               if (found && co->worldSize > 1) {
                 auto comm = createGlooCommunicator(*co);
                 if (!comm)
                   raise(comm.message());
                 opts.communicator = *comm;
               }
             }
             opts.emulatedLinkBytesPerSecond = emulateLink;
             opts.deviceMemoryBytes = deviceBytes;
             opts.numThreads = threads < 1 ? 1 : threads;
             opts.poison = poison;
             auto s = Session::create(plan.plan, backend, opts);
             if (!s)
               raise(s.message());
             auto out = std::make_unique<PySession>();
             out->plan = plan;
             out->session = s.take();
             return out;
           }),
           py::arg("plan"), py::arg("backend") = "host",
           py::arg("device_bytes") = 0, py::arg("threads") = 1,
           py::arg("poison") = false, py::arg("emulate_link") = 0.0,
           py::arg("data_parallel") = false,
           "Creates a session. device_bytes: bytes of device memory (host: "
           "simulated capacity; cuda: a limit), 0 = the plan's arena. "
           "emulate_link: host backend only, an emulated host<->device link "
           "in bytes per second per direction (each copy takes at least its "
           "bytes / emulate_link seconds), 0 = off. "
           "OffloadError when the device is smaller than the plan's arena, "
           "an op has no kernel, the backend is unknown, or emulate_link is "
           "negative, not finite, or given for another backend. "
           "data_parallel: join the data-parallel job of the launcher's "
           "environment (RANK, WORLD_SIZE; docs/data_parallel.md); "
           "OffloadError when the rendezvous fails or the ranks' plans "
           "differ.")
      .def_property_readonly(
          "plan", [](const PySession &s) { return s.plan; })
      .def_property_readonly(
          "backend",
          [](const PySession &s) { return std::string(s.session->backendName()); })
      .def(
          "bind",
          [](PySession &s, const std::string &name, const py::handle &value) {
            std::string what = "bind('" + name + "')";
            bool input = false;
            for (auto &b : s.session->inputBindings())
              input |= b.first == name && b.second == BufferRole::Input;
            Tensor t = input && borrowable(value) ? borrowTensor(value, what)
                                                  : toTensor(value, what);
            BusyGuard guard(s);
            check(s.session->bind(name, std::move(t)));
          },
          py::arg("name"), py::arg("value"),
          "Binds a numpy array to the input binding `name`. Parameters, "
          "state and optimizer state are copied once into the store. An "
          "input (role input) that is a C-contiguous, aligned array of a "
          "runtime dtype is borrowed without a copy: the session keeps a "
          "reference to it until rebound, and each step() uploads its bytes "
          "as they are then; any other array is copied. OffloadError: no "
          "such binding, or its dtype/shape differ (the message gives "
          "both).")
      .def(
          "input_data_ptr",
          [](const PySession &s, const std::string &name) -> uintptr_t {
            const Tensor *t = s.session->input(name);
            if (!t)
              raise("no input bound as '" + name + "'");
            return reinterpret_cast<uintptr_t>(t->data());
          },
          py::arg("name"),
          "Address of the bytes the session will upload for input `name` "
          "(equal to the array's data pointer when it was borrowed).")
      .def(
          "bind_zeros",
          [](PySession &s, const std::string &name) {
            BusyGuard guard(s);
            check(s.session->bindZeros(name));
          },
          py::arg("name"))
      .def(
          "input_type",
          [](const PySession &s, const std::string &name) {
            DType dt;
            std::vector<int64_t> shape;
            check(s.session->inputType(name, dt, shape));
            return py::make_tuple(numpyDtype(dt), py::tuple(py::cast(shape)));
          },
          py::arg("name"), "(numpy dtype name, shape) of an input binding.")
      .def(
          "input_bindings",
          [](const PySession &s) {
            py::list out;
            for (auto &b : s.session->inputBindings())
              out.append(py::make_tuple(b.first, bufferRoleName(b.second)));
            return out;
          },
          "[(name, role)] of the input bindings, in plan order; role is "
          "parameter, state, optimizer_state or input.")
      .def(
          "missing_bindings",
          [](const PySession &s) { return s.session->missingBindings(); })
      .def(
          "step",
          [](PySession &s) {
            Status st;
            BusyGuard guard(s);
            {
              py::gil_scoped_release release;
              st = s.session->step();
            }
            check(st);
          },
          "Runs one training step (forward, backward, optimizer) and commits "
          "the new parameters to the store; on failure (OffloadError) the "
          "store is unchanged.")
      .def_property_readonly(
          "loss",
          [](PySession &s) {
            BusyGuard guard(s);
            auto l = s.session->loss();
            if (!l)
              raise(l.message());
            return *l;
          },
          "The loss of the last successful step (float).")
      .def(
          "output",
          [](PySession &s, const std::string &name) {
            BusyGuard guard(s);
            auto t = s.session->output(name);
            if (!t)
              raise(t.message());
            return toArray(*t);
          },
          py::arg("name"),
          "A copy of output `name` of the last successful step ('loss', "
          "'grad:NAME', new parameter values).")
      .def(
          "output_view",
          [](PySession &s, const std::string &name) {
            BusyGuard guard(s);
            auto t = s.session->output(name); // to check the name and step
            if (!t)
              raise(t.message());
            const Tensor *held = s.session->outputTensor(name);
            if (!held)
              raise("output '" + name + "' is not held by the session");
            return viewArray(*held);
          },
          py::arg("name"),
          "A read-only numpy array viewing output `name` of the last "
          "successful step where the runtime holds it (no copy). A gradient "
          "or the loss: that step's value for as long as the view lives (the "
          "next step reads into new tensors). A new parameter value: the "
          "store's tensor (see get_view).")
      .def(
          "get_view",
          [](PySession &s, const std::string &name) -> py::object {
            BusyGuard guard(s);
            const Tensor *t = s.session->store().get(name);
            if (!t)
              raise("the parameter store has no value named '" + name + "'");
            return viewArray(*t);
          },
          py::arg("name"),
          "A read-only numpy array viewing the store's tensor of `name` (no "
          "copy). It stays valid memory for as long as it exists, but its "
          "values are defined only until the next step() or bind of `name`: "
          "on the host backend a step commits the new value into the same "
          "tensor in place (the view then shows it), a bind replaces the "
          "tensor (the view keeps the old bytes). np.array(view) keeps a "
          "snapshot.")
      .def("output_names",
           [](const PySession &s) { return s.session->outputNames(); })
      .def(
          "get",
          [](PySession &s, const std::string &name) -> py::object {
            BusyGuard guard(s);
            const Tensor *t = s.session->store().get(name);
            if (!t)
              raise("the parameter store has no value named '" + name + "'");
            return toArray(*t);
          },
          py::arg("name"),
          "A copy of the committed value of `name` in the parameter store.")
      .def("store_names",
           [](PySession &s) { return s.session->store().names(); })
      .def_property_readonly(
          "measured_peak_device_bytes",
          [](const PySession &s) {
            return s.session->measuredPeakDeviceBytes();
          },
          "Peak bytes of live device buffers measured over all steps run.")
      .def_property_readonly(
          "planned_peak_device_bytes",
          [](const PySession &s) {
            return s.session->plannedPeakDeviceBytes();
          })
      .def_property_readonly(
          "last_step_seconds",
          [](const PySession &s) { return s.session->lastStepSeconds(); })
      .def_property_readonly(
          "stream_busy_seconds",
          [](const PySession &s) {
            auto a = s.session->streamBusySeconds();
            return py::make_tuple(a[0], a[1], a[2]);
          },
          "(compute, host-to-device, device-to-host) busy seconds of the "
          "last step.")
      .def_property_readonly(
          "comm_busy_seconds",
          [](const PySession &s) {
            return s.session->streamBusySeconds()[CommStream];
          },
          "Busy seconds of the communication stream (data parallel's "
          "offload.all_reduce) in the last step, waiting for the other ranks "
          "included.")
      .def_property_readonly(
          "comm_hidden_seconds",
          [](const PySession &s) { return s.session->commComputeOverlapSeconds(); },
          "Seconds of the last step during which the communication stream and "
          "the compute stream were both busy (reductions hidden under "
          "backward); -1 when the backend does not measure it.");
}

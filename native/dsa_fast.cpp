// dsa_fast.cpp -- the per-call path of dsa.adapters.torch, as a CPython extension.
//
// It is compiled into the same shared library as dsa_alloc.cpp (so it calls
// dsa_replay_begin / dsa_replay_end directly) and imported from it as the
// module _dsa_fast.  A Dispatcher is the call path of one AttachedModule:
//
//   key     the call's signature, computed in C from the argument tensors'
//           TensorImpl (shape, strides, dtype, requires_grad), grad and
//           inference mode, the intra-op thread count, the owner's training
//           flag and the calling thread;
//   lookup  a hash map from that key to the slab Python bound it to;
//   replay  dsa_replay_begin, the wrapped module's call, dsa_replay_end.
//
// Anything else -- keyword arguments, an argument that is not a plain CPU
// strided tensor, hooks on the wrapper, a key Python has not bound, a slab
// that cannot start a pass, a pass that fell back or let a block escape --
// goes to Python (the "slow" callable, or "after" once a pass has run), which
// keeps every decision: planning, the caches' limits, replans.  Python binds a
// key after a replay it made itself, and clears the map whenever its caches
// change, so a stale binding can only cost a trip to the slow path: slab
// records are never freed (dsa_replay_begin refuses a released one).
//
// Every method runs with the GIL held, which serialises access to the map;
// the forward itself runs without any lock of ours.
//
// Reading a tensor's TensorImpl: torch.Tensor's instances start with
// PyObject_HEAD followed by the at::Tensor (one intrusive pointer).  That
// layout is checked at run time against Tensor._cdata (see impl_address) before
// a Dispatcher is ever enabled, and the library is rebuilt per torch version.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/TensorImpl.h>

#include <cstdint>
#include <new>
#include <string>
#include <unordered_map>

extern "C" {
void* dsa_replay_begin(void* handle);
int dsa_replay_end(void* session);
}

namespace {

struct TensorMirror {
  PyObject_HEAD
  c10::TensorImpl* impl;
};

struct Bound {
  void* slab = nullptr;
  PyObject* token = nullptr;  // owned
  int64_t calls = 0;          // fast-path calls since the last sync
  uint64_t tick = 0;          // dispatcher clock at the latest call
};

struct Dispatcher {
  PyObject_HEAD
  PyObject* module;      // the wrapped callable
  PyObject* slow;        // called with the arguments when the fast path declines
  PyObject* after;       // after(token, slab, result) when a pass fell back or leaked
  PyObject* owner;       // whose .training is in the key, or nullptr
  PyObject* inst_dict;   // the wrapper's __dict__: its hook dicts are checked per call
  PyObject* globals;     // tuple of torch's global module-hook dicts
  PyTypeObject* tensor_type;
  std::unordered_map<std::string, Bound>* map;
  uint64_t clock;
  int enabled;
};

PyObject* s_training = nullptr;
const char* const kHookNames[] = {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                                  "_backward_pre_hooks"};
PyObject* s_hooks[4] = {nullptr, nullptr, nullptr, nullptr};
PyObject* s_compiled = nullptr;

void put(std::string& key, int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }

// 1: key built; 0: these arguments are not for the fast path; -1: Python error set.
int build_key(Dispatcher* d, PyObject* args, std::string& key) {
  key.clear();
  int64_t training = 2;
  if (d->owner != nullptr) {
    PyObject* t = PyObject_GetAttr(d->owner, s_training);
    if (t == nullptr) return -1;
    training = PyObject_IsTrue(t);
    Py_DECREF(t);
    if (training < 0) return -1;
  }
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  put(key, static_cast<int64_t>(PyThread_get_thread_ident()));
  put(key, training | (c10::GradMode::is_enabled() ? 4 : 0) |
               (c10::InferenceMode::is_enabled() ? 8 : 0));
  put(key, at::get_num_threads());
  put(key, n);
  try {
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* a = PyTuple_GET_ITEM(args, i);
      if (Py_TYPE(a) != d->tensor_type) return 0;
      const c10::TensorImpl* impl = reinterpret_cast<TensorMirror*>(a)->impl;
      if (impl == nullptr || impl->device_type() != c10::DeviceType::CPU ||
          impl->layout() != c10::kStrided) {
        return 0;
      }
      const int64_t dim = impl->dim();
      put(key, dim | (static_cast<int64_t>(impl->dtype().toScalarType()) << 8) |
                   (impl->requires_grad() ? (int64_t{1} << 16) : 0));
      for (int64_t s : impl->sizes()) put(key, s);
      for (int64_t s : impl->strides()) put(key, s);
    }
  } catch (...) {  // e.g. symbolic sizes: Python's path decides
    return 0;
  }
  return 1;
}

// Whether the wrapper would run hooks (nn.Module.__call__ does that): 1 yes,
// 0 no, -1 error.
int has_hooks(Dispatcher* d) {
  for (PyObject* name : s_hooks) {
    PyObject* h = PyDict_GetItemWithError(d->inst_dict, name);
    if (h == nullptr) {
      if (PyErr_Occurred()) return -1;
      continue;
    }
    const int truth = PyObject_IsTrue(h);
    if (truth != 0) return truth;
  }
  PyObject* compiled = PyDict_GetItemWithError(d->inst_dict, s_compiled);
  if (compiled != nullptr && compiled != Py_None) return 1;
  if (compiled == nullptr && PyErr_Occurred()) return -1;
  const Py_ssize_t n = PyTuple_GET_SIZE(d->globals);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const int truth = PyObject_IsTrue(PyTuple_GET_ITEM(d->globals, i));
    if (truth != 0) return truth;
  }
  return 0;
}

thread_local std::string t_key;

PyObject* Dispatcher_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* d = reinterpret_cast<Dispatcher*>(self);
  if (d->slow == nullptr) {  // its references were cleared (garbage collection of the wrapper)
    PyErr_SetString(PyExc_RuntimeError, "this attached module has been released");
    return nullptr;
  }
  if (!d->enabled || (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0)) {
    return PyObject_Call(d->slow, args, kwargs);
  }
  const int hooks = has_hooks(d);
  if (hooks != 0) return hooks < 0 ? nullptr : PyObject_Call(d->slow, args, kwargs);
  const int built = build_key(d, args, t_key);
  if (built <= 0) return built < 0 ? nullptr : PyObject_Call(d->slow, args, kwargs);
  auto it = d->map->find(t_key);
  if (it == d->map->end()) return PyObject_Call(d->slow, args, kwargs);
  void* session = dsa_replay_begin(it->second.slab);
  if (session == nullptr) return PyObject_Call(d->slow, args, kwargs);
  // the map may change while the module runs (another thread, a nested call):
  // keep what the end of the pass needs, not the iterator
  Bound& b = it->second;
  b.calls++;
  b.tick = ++d->clock;
  void* slab = b.slab;
  PyObject* token = b.token;
  Py_INCREF(token);
  PyObject* out = PyObject_Call(d->module, args, nullptr);
  const int result = dsa_replay_end(session);
  if (result != 0) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject* r = PyObject_CallFunction(d->after, "OKi", token, static_cast<unsigned long long>(
                                                                reinterpret_cast<uintptr_t>(slab)),
                                        result);
    if (r == nullptr && out != nullptr) {  // the forward succeeded: report the bookkeeping error
      Py_CLEAR(out);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(tb);
    } else {
      Py_XDECREF(r);
      if (type != nullptr) {
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
      }
    }
  }
  Py_DECREF(token);
  return out;
}

void clear_map(Dispatcher* d) {
  if (d->map == nullptr) return;
  std::unordered_map<std::string, Bound> old;
  old.swap(*d->map);  // tokens are released after the map is consistent
  for (auto& kv : old) Py_XDECREF(kv.second.token);
}

PyObject* Dispatcher_bind(PyObject* self, PyObject* py_args) {
  auto* d = reinterpret_cast<Dispatcher*>(self);
  PyObject *args, *token;
  unsigned long long slab;
  if (!PyArg_ParseTuple(py_args, "O!KO:bind", &PyTuple_Type, &args, &slab, &token)) return nullptr;
  std::string key;
  const int built = build_key(d, args, key);
  if (built < 0) return nullptr;
  if (built == 0 || slab == 0) Py_RETURN_FALSE;
  try {
    Bound& b = (*d->map)[key];
    Py_INCREF(token);
    Py_XSETREF(b.token, token);
    b.slab = reinterpret_cast<void*>(static_cast<uintptr_t>(slab));
    b.tick = ++d->clock;
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
  Py_RETURN_TRUE;
}

PyObject* Dispatcher_clear(PyObject* self, PyObject*) {
  clear_map(reinterpret_cast<Dispatcher*>(self));
  Py_RETURN_NONE;
}

// [(token, slab, calls, tick)] for every binding called on the fast path since
// the last sync, in the order of their latest call; their call counts restart.
PyObject* Dispatcher_sync(PyObject* self, PyObject*) {
  auto* d = reinterpret_cast<Dispatcher*>(self);
  PyObject* out = PyList_New(0);
  if (out == nullptr) return nullptr;
  for (auto& kv : *d->map) {
    Bound& b = kv.second;
    if (b.calls == 0) continue;
    PyObject* item = Py_BuildValue("(OKLK)", b.token,
                                   static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(b.slab)),
                                   static_cast<long long>(b.calls), static_cast<unsigned long long>(b.tick));
    if (item == nullptr || PyList_Append(out, item) < 0) {
      Py_XDECREF(item);
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(item);
    b.calls = 0;
  }
  return out;
}

PyObject* Dispatcher_key(PyObject* self, PyObject* py_args) {
  PyObject* args;
  if (!PyArg_ParseTuple(py_args, "O!:key", &PyTuple_Type, &args)) return nullptr;
  std::string key;
  const int built = build_key(reinterpret_cast<Dispatcher*>(self), args, key);
  if (built < 0) return nullptr;
  if (built == 0) Py_RETURN_NONE;
  return PyBytes_FromStringAndSize(key.data(), static_cast<Py_ssize_t>(key.size()));
}

PyObject* Dispatcher_size(PyObject* self, PyObject*) {
  return PyLong_FromSsize_t(static_cast<Py_ssize_t>(reinterpret_cast<Dispatcher*>(self)->map->size()));
}

int Dispatcher_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* d = reinterpret_cast<Dispatcher*>(self);
  Py_VISIT(d->module);
  Py_VISIT(d->slow);
  Py_VISIT(d->after);
  Py_VISIT(d->owner);
  Py_VISIT(d->inst_dict);
  Py_VISIT(d->globals);
  Py_VISIT(reinterpret_cast<PyObject*>(d->tensor_type));
  if (d->map != nullptr) {
    for (auto& kv : *d->map) Py_VISIT(kv.second.token);
  }
  return 0;
}

int Dispatcher_clear_refs(PyObject* self) {
  auto* d = reinterpret_cast<Dispatcher*>(self);
  d->enabled = 0;
  clear_map(d);
  Py_CLEAR(d->module);
  Py_CLEAR(d->slow);
  Py_CLEAR(d->after);
  Py_CLEAR(d->owner);
  Py_CLEAR(d->inst_dict);
  Py_CLEAR(d->globals);
  Py_CLEAR(d->tensor_type);
  return 0;
}

void Dispatcher_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Dispatcher_clear_refs(self);
  auto* d = reinterpret_cast<Dispatcher*>(self);
  delete d->map;
  d->map = nullptr;
  Py_TYPE(self)->tp_free(self);
}

int Dispatcher_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"module", "slow", "after", "owner", "inst_dict", "globals",
                                "tensor_type", nullptr};
  PyObject *module, *slow, *after, *owner, *inst_dict, *globals, *tensor_type;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO!O!O!:Dispatcher", const_cast<char**>(names),
                                   &module, &slow, &after, &owner, &PyDict_Type, &inst_dict,
                                   &PyTuple_Type, &globals, &PyType_Type, &tensor_type)) {
    return -1;
  }
  auto* d = reinterpret_cast<Dispatcher*>(self);
  Dispatcher_clear_refs(self);
  if (d->map == nullptr) {
    d->map = new (std::nothrow) std::unordered_map<std::string, Bound>();
    if (d->map == nullptr) {
      PyErr_NoMemory();
      return -1;
    }
  }
  Py_INCREF(module);
  d->module = module;
  Py_INCREF(slow);
  d->slow = slow;
  Py_INCREF(after);
  d->after = after;
  if (owner != Py_None) {
    Py_INCREF(owner);
    d->owner = owner;
  }
  Py_INCREF(inst_dict);
  d->inst_dict = inst_dict;
  Py_INCREF(globals);
  d->globals = globals;
  Py_INCREF(tensor_type);
  d->tensor_type = reinterpret_cast<PyTypeObject*>(tensor_type);
  d->clock = 0;
  d->enabled = 1;
  return 0;
}

PyObject* Dispatcher_get_enabled(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<Dispatcher*>(self)->enabled);
}

int Dispatcher_set_enabled(PyObject* self, PyObject* value, void*) {
  const int truth = value == nullptr ? 0 : PyObject_IsTrue(value);
  if (truth < 0) return -1;
  reinterpret_cast<Dispatcher*>(self)->enabled = truth;
  return 0;
}

PyMethodDef Dispatcher_methods[] = {
    {"bind", Dispatcher_bind, METH_VARARGS,
     "bind(args, slab, token) -> bool: serve calls with these arguments' key on this thread from slab"},
    {"clear", Dispatcher_clear, METH_NOARGS, "clear(): forget every binding"},
    {"sync", Dispatcher_sync, METH_NOARGS,
     "sync() -> [(token, slab, calls, tick)]: bindings called since the last sync"},
    {"key", Dispatcher_key, METH_VARARGS, "key(args) -> bytes or None: the key of a call (for tests)"},
    {"size", Dispatcher_size, METH_NOARGS, "size() -> int: the number of bindings"},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Dispatcher_getset[] = {
    {"enabled", Dispatcher_get_enabled, Dispatcher_set_enabled,
     "False: every call goes to the slow callable", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject DispatcherType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// The TensorImpl address read through the layout this module assumes; the
// caller compares it with Tensor._cdata before trusting the layout.
PyObject* impl_address(PyObject*, PyObject* arg) {
  if (Py_TYPE(arg)->tp_basicsize < static_cast<Py_ssize_t>(sizeof(TensorMirror))) Py_RETURN_NONE;
  return PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(
      reinterpret_cast<uintptr_t>(reinterpret_cast<TensorMirror*>(arg)->impl)));
}

PyMethodDef module_methods[] = {
    {"impl_address", impl_address, METH_O,
     "impl_address(tensor) -> int: the TensorImpl pointer at the assumed offset (not dereferenced)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_dsa_fast",
                          "The per-call path of dsa.adapters.torch (see dsa_fast.cpp).", -1,
                          module_methods};

}  // namespace

PyMODINIT_FUNC PyInit__dsa_fast() {
  DispatcherType.tp_name = "_dsa_fast.Dispatcher";
  DispatcherType.tp_basicsize = sizeof(Dispatcher);
  DispatcherType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  DispatcherType.tp_doc = "The per-call path of one AttachedModule.";
  DispatcherType.tp_new = PyType_GenericNew;
  DispatcherType.tp_init = Dispatcher_init;
  DispatcherType.tp_dealloc = Dispatcher_dealloc;
  DispatcherType.tp_traverse = Dispatcher_traverse;
  DispatcherType.tp_clear = Dispatcher_clear_refs;
  DispatcherType.tp_call = Dispatcher_call;
  DispatcherType.tp_methods = Dispatcher_methods;
  DispatcherType.tp_getset = Dispatcher_getset;
  if (PyType_Ready(&DispatcherType) < 0) return nullptr;
  s_training = PyUnicode_InternFromString("training");
  s_compiled = PyUnicode_InternFromString("_compiled_call_impl");
  if (s_training == nullptr || s_compiled == nullptr) return nullptr;
  for (int i = 0; i < 4; ++i) {
    s_hooks[i] = PyUnicode_InternFromString(kHookNames[i]);
    if (s_hooks[i] == nullptr) return nullptr;
  }
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
  Py_INCREF(&DispatcherType);
  if (PyModule_AddObject(m, "Dispatcher", reinterpret_cast<PyObject*>(&DispatcherType)) < 0) {
    Py_DECREF(&DispatcherType);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}

/* The error catalogue: one table row per status code, and the lookups over it.
 *
 * This table is the single source of every status's phrase: cn_set_error writes
 * "<op>: <phrase>: <detail>" with cn__status_phrase, which reads the row, so raised messages and
 * the patterns documented here cannot drift apart. To add a code, append a row (in code order);
 * tests/test_catalogue.c then demands a call that raises it. */
#include "cinder/catalogue.h"

#include <ctype.h>
#include <string.h>

#include "core/error_internal.h"

/* A row's identity. The status number is written out so that the row reads like the record it
 * exports; the array size below is negative, failing the build, if it disagrees with error.h. */
#define CODE(sym, num)                                                                             \
    .status = (cn_status)((sym) + 0 * sizeof(char[(sym) == (num) ? 1 : -1])), .name = #sym,        \
    .error_code = #sym " (" #num ")"

/* The usual pattern: the op, the status's phrase, then the detail. A row whose messages take
 * another form sets .phrase and .message_pattern itself (the phrase must appear in the pattern). */
#define PHRASE(p) .phrase = p, .message_pattern = "{op}: " p ": {detail}"

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- the table ------------------------------------------------------------------------------ */

static const cn_error_entry catalogue[] = {
    {
        CODE(CN_ERR_NULL_ARG, 1),
        .slug = "null-argument",
        PHRASE("required argument is NULL"),
        .documentation =
            "A call received NULL for a pointer it cannot do without: an input tensor, the "
            "`out` pointer of cn_device_parse, a shape or parameter array, a name string. Ops "
            "then return NULL, other calls return CN_ERR_NULL_ARG, and the detail names the "
            "argument. Because the error state is sticky, an op handed the NULL result of an "
            "earlier failed op keeps that earlier error instead of reporting this one; so "
            "CN_ERR_NULL_ARG means the NULL did not come from a cinder failure still on record. "
            "It came from your own code (an uninitialised or reset pointer, an unchecked "
            "malloc), or cn_clear_error() ran between the failure and the use of its result.",
        .trigger_scenarios =
            "cn_add(NULL, x) with no error pending (e.g. right after cn_clear_error()); "
            "cn_device_parse(\"cpu\", NULL); using the NULL result of a failed op after the "
            "error was cleared; passing a tensor pointer that was set to NULL after "
            "cn_release and never reassigned.",
        .common_situations =
            "A loop that calls cn_clear_error() at the top of each iteration while a tensor "
            "from the previous iteration failed silently; an early-exit path of the program's "
            "own code that leaves a tensor variable NULL; a wrapper that swallows errors "
            "(clears them) and returns NULL to a caller that keeps computing. Note that some "
            "arguments are optional by contract, such as the bias of cn_linear and cn_conv2d: "
            "NULL there is not an error.",
        .solutions =
            LIST("Read the detail: it names the argument that was NULL; trace where that variable "
                 "was last assigned.",
                 "Check the result of the call that produced the tensor (or the final result of a "
                 "whole chain) before calling cn_clear_error(); never clear the error between "
                 "producing a tensor and using it.",
                 "If the argument is optional, check the op's comment in include/cinder/ops.h for "
                 "the documented way to omit it; if it is required, create it first (cn_zeros, "
                 "cn_from_data)."),
        .example_fix = "// before\n"
                       "cn_tensor *h = cn_matmul(x, w);\n"
                       "cn_clear_error();                 /* hides why h is NULL */\n"
                       "cn_tensor *y = cn_relu(h);        /* fails: CN_ERR_NULL_ARG */\n"
                       "// after\n"
                       "cn_tensor *h = cn_matmul(x, w);\n"
                       "if (!h) {\n"
                       "    fprintf(stderr, \"%s\\n\", cn_last_error());\n"
                       "    return -1;\n"
                       "}\n"
                       "cn_tensor *y = cn_relu(h);",
        .prevention_tips =
            LIST("Check `if (!t)` (or the last result of a chain) before clearing the error.",
                 "Call cn_clear_error() only where the error is actually handled.",
                 "Initialise tensor pointers to NULL and release them with cn_release, which "
                 "ignores NULL, on every exit path."),
    },
    {
        CODE(CN_ERR_INVALID_ARG, 2),
        .slug = "invalid-argument",
        PHRASE("invalid argument"),
        .documentation =
            "A non-tensor argument is outside the range the call accepts. Typical cases: a dim "
            "that the tensor does not have (dims may be negative and count from the end, so a "
            "tensor of ndim n accepts -n .. n-1, and n for cn_unsqueeze), a permutation that "
            "is not a rearrangement of 0 .. ndim-1, a zero step in cn_arange or a step below 1 "
            "in cn_slice, lo > hi in cn_clamp, a split size or chunk count below 1, a negative "
            "size in a shape, an ndim outside 0 .. CN_MAX_DIMS (8), pooling padding above half "
            "the kernel. The detail names the argument, its value and the accepted range.",
        .trigger_scenarios =
            "cn_transpose(t, 0, 7) on a 2-D tensor; cn_softmax(x, 2) on a [B, C] tensor; "
            "cn_slice(t, 0, 0, 4, 0) (step 0); cn_arange(0, 10, 0, CN_F32, dev); "
            "cn_clamp(x, 1.0, -1.0); cn_permute with a repeated entry; cn_max_pool2d with "
            "padding 2 and a 3x3 kernel.",
        .common_situations =
            "Code written for batched input ([B, T, C]) run on a single example, so dim 2 no "
            "longer exists; a positive dim hard-coded where the last dim (-1) was meant; a "
            "step, stride or chunk count computed from data that reaches 0; hyper-parameters "
            "read from a config file without validation.",
        .solutions =
            LIST("Use negative dims for trailing axes (cn_softmax(x, -1)) so the code works for "
                 "any number of leading batch dims.",
                 "Print the tensor with cn_tensor_str to see its real ndim and shape next to the "
                 "value in the detail.",
                 "Validate computed scalars before the call: step > 0, lo <= hi, chunks >= 1, "
                 "padding <= kernel / 2."),
        .example_fix = "// before: logits is [B, C]; dim 2 only exists for [B, T, C]\n"
                       "cn_tensor *p = cn_softmax(logits, 2);    /* fails: CN_ERR_INVALID_ARG */\n"
                       "// after: count from the end, valid for any ndim\n"
                       "cn_tensor *p = cn_softmax(logits, -1);",
        .prevention_tips =
            LIST("Prefer negative dims for axes counted from the end.",
                 "Check cn_ndim(x) at the entry of functions that assume a layout.",
                 "Keep a shape comment such as `// x: [B, T, C]` above code that names dims."),
    },
    {
        CODE(CN_ERR_SHAPE, 3),
        .slug = "incompatible-shapes",
        PHRASE("incompatible shapes"),
        .documentation =
            "The input shapes cannot be combined by the op. Binary elementwise ops (add, sub, "
            "mul, div, pow, maximum, minimum, the comparisons, where) broadcast with NumPy "
            "rules: shapes are aligned from the right, and each pair of sizes must be equal or "
            "one of them 1. cn_matmul needs the inner sizes to agree ([.., M, K] @ [.., K, N]) "
            "and broadcastable batch dims; cn_reshape keeps the element count; cn_cat needs "
            "equal sizes on every dim except the one it joins along, cn_stack equal shapes; "
            "cn_expand only stretches size-1 dims; cn_conv2d needs the weight's input "
            "channels times groups to equal the channels of x. The detail prints the shapes.",
        .trigger_scenarios =
            "cn_add of a [2, 3] and a [4] tensor (3 against 4 in the last dim); cn_matmul of "
            "[B, T, C] with a weight stored as [C_out, C]; cn_reshape of 12 elements to [5, 3]; "
            "cn_cat of [2, 3] and [2, 4] along dim 0; a per-channel bias [C] added to a "
            "[N, C, H, W] feature map, which aligns it with W instead of C.",
        .common_situations =
            "A weight matrix in the [out, in] layout used directly in cn_matmul (cn_linear "
            "expects exactly that layout); per-channel parameters for NCHW data not reshaped "
            "to [C, 1, 1]; a smaller last batch meeting a tensor cached from a full batch; a "
            "_dim reduction without keepdim whose result no longer lines up with its input.",
        .solutions = LIST(
            "Read the shapes in the detail and align them from the right to find the dim that "
            "disagrees.",
            "Insert size-1 dims with cn_unsqueeze or cn_reshape so that broadcasting pairs the "
            "intended axes (a bias [C] becomes [C, 1, 1] for NCHW).",
            "Pass keepdim = 1 to _dim reductions whose result is combined with the input, as "
            "in x - mean.",
            "For matmul, transpose the operand whose inner size is wrong (cn_transpose of its "
            "last two dims) or use cn_linear for [out, in] weights."),
        .example_fix =
            "// before: x is [8, 16, 32, 32] (NCHW), bias is [16]\n"
            "cn_tensor *y = cn_add(x, bias);        /* fails: CN_ERR_SHAPE (32 vs 16) */\n"
            "// after: bias as [16, 1, 1] broadcasts over H and W\n"
            "const int64_t c11[3] = {16, 1, 1};\n"
            "cn_tensor *b = cn_reshape(bias, c11, 3);\n"
            "cn_tensor *y = cn_add(x, b);",
        .prevention_tips =
            LIST("Write each tensor's shape in a comment where it is created.",
                 "Use keepdim = 1 on reductions that feed back into elementwise ops.",
                 "Test with sizes that all differ (B = 2, C = 3, H = 5, ...) so that a swapped dim "
                 "fails loudly instead of broadcasting by accident."),
    },
    {
        CODE(CN_ERR_DTYPE, 4),
        .slug = "dtype-mismatch",
        PHRASE("unsupported or mismatched dtypes"),
        .documentation =
            "Either the inputs of an op have different dtypes, or the op does not accept the "
            "dtype it was given. cinder never promotes silently: adding an f32 and an f64 "
            "tensor is an error, not an f64 result, so precision and memory use never change "
            "behind your back. Index tensors of cn_gather, cn_scatter_add and cn_index_select "
            "must be i64. A tensor of the wrong kind altogether (an int tensor passed to "
            "cn_exp) is CN_ERR_KIND instead. The detail names the dtypes involved.",
        .trigger_scenarios =
            "cn_add(a_f32, b_f64); cn_where(cond, a_f32, b_f64); cn_index_select or cn_gather "
            "with an i32 index tensor; cn_cat of an f32 and an f16 tensor; a dtype value "
            "outside cn_dtype passed to a creation function.",
        .common_situations =
            "Data loaded from C double arrays as f64 and combined with f32 parameters; labels "
            "or token ids stored as i32 and used as indices; constants created in f32 while "
            "the model runs in f64; mixed-precision code that casts activations to f16 or bf16 "
            "but not the weights they meet.",
        .solutions =
            LIST("Cast one side explicitly with cn_cast, choosing the dtype deliberately (usually "
                 "the parameters' dtype).",
                 "Create constants and buffers with the dtype of the tensor they will meet: "
                 "cn_full(shape, n, v, cn_dtype_of(x), cn_device_of(x)).",
                 "Build index tensors as CN_I64 from the start."),
        .example_fix =
            "// before: x is made from doubles (f64), w is f32\n"
            "cn_tensor *x = cn_from_data(buf, shape, 2, CN_F64, cn_cpu());\n"
            "cn_tensor *y = cn_mul(x, w);           /* fails: CN_ERR_DTYPE (f64 vs f32) */\n"
            "// after: convert once, at the input boundary\n"
            "cn_tensor *x64 = cn_from_data(buf, shape, 2, CN_F64, cn_cpu());\n"
            "cn_tensor *x = cn_cast(x64, cn_dtype_of(w));\n"
            "cn_release(x64);\n"
            "cn_tensor *y = cn_mul(x, w);",
        .prevention_tips =
            LIST("Choose one compute dtype per model and convert data to it where it enters.",
                 "Derive the dtype of new tensors from existing ones with cn_dtype_of.",
                 "Keep index tensors i64 from the point they are created."),
    },
    {
        CODE(CN_ERR_KIND, 5),
        .slug = "wrong-tensor-kind",
        PHRASE("wrong tensor kind for this op"),
        .documentation =
            "Every dtype belongs to a kind: float (f32, f64, f16, bf16), int (i32, i64, u8) or "
            "bool, and each op accepts only some kinds. exp, log, sqrt, the trigonometric and "
            "activation functions other than relu, softmax, mean, var, logsumexp, pow, matmul "
            "and conv2d take float tensors only; the logical ops and the condition of cn_where "
            "take bool; arithmetic (add, neg, abs, relu, ...) takes float and int but not bool. "
            "Unlike CN_ERR_DTYPE, no cast within the same kind helps: the tensor has to change "
            "kind. The detail names the op, the dtype and the kinds the op accepts.",
        .trigger_scenarios =
            "cn_exp of an i32 tensor; cn_mean of i64 token ids; cn_softmax of integer logits; "
            "cn_logical_and of two f32 masks; cn_add of two bool masks; cn_matmul of u8 "
            "images.",
        .common_situations =
            "Computing accuracy as the mean of a bool comparison result; masks built as float "
            "0/1 and then used with logical ops, or bool masks fed to arithmetic; raw integer "
            "data (u8 pixels, i32 counts) passed straight into a network.",
        .solutions =
            LIST("Cast to a float dtype first: cn_cast(x, CN_F32).",
                 "For accuracy, compare (bool), cast to f32, then take cn_mean.",
                 "For logic, produce masks with the comparison ops, which return bool, or convert "
                 "with cn_cast(mask, CN_BOOL)."),
        .example_fix = "// before: correct = cn_eq(pred, labels) is bool\n"
                       "cn_tensor *acc = cn_mean(correct);     /* fails: CN_ERR_KIND */\n"
                       "// after\n"
                       "cn_tensor *correct_f = cn_cast(correct, CN_F32);\n"
                       "cn_tensor *acc = cn_mean(correct_f);",
        .prevention_tips =
            LIST("Convert raw integer data to float when it is loaded.",
                 "Keep masks bool and values float, and convert explicitly where they meet.",
                 "Check the kinds an op accepts in its comment in include/cinder/ops.h."),
    },
    {
        CODE(CN_ERR_DEVICE_MISMATCH, 6),
        .slug = "device-mismatch",
        PHRASE("inputs are on different devices"),
        .documentation =
            "The inputs of an op live on different devices. cinder never copies between "
            "devices implicitly, because a hidden host-to-GPU transfer inside a loop is a "
            "performance bug that should be visible. Devices are compared with cn_device_eq: "
            "backend, device index (cuda:0 is not cuda:1) and autodiff settings must agree. A "
            "backend registered at run time is a device of its own even when it computes in "
            "host memory like the CPU. The detail prints each input's device.",
        .trigger_scenarios =
            "cn_add(x_on_cuda, bias_on_cpu); cn_matmul of inputs on cuda:0 and cuda:1; a "
            "constant made with cn_full(..., cn_cpu()) combined with tensors on the default "
            "device; cn_cat of tensors from two backends; adding a tensor of a registered "
            "custom backend to a CPU tensor.",
        .common_situations =
            "Constants, masks or index tensors created with cn_cpu() while the model runs on "
            "CINDER_DEVICE=cuda; the model moved to the GPU but not the batch (or the "
            "reverse); a checkpoint loaded on the CPU and combined with GPU parameters.",
        .solutions =
            LIST("Move one side explicitly: cn_to_device(t, cn_device_of(other)).",
                 "Create new tensors on the device of the tensor they will meet: pass "
                 "cn_device_of(x) instead of cn_cpu().",
                 "Pick the device once (cn_default_device() or cn_device_parse) and pass it to "
                 "every function that creates tensors."),
        .example_fix =
            "// before: x lives on cuda:0\n"
            "cn_tensor *mask = cn_ones(shape, 2, CN_F32, cn_cpu());\n"
            "cn_tensor *y = cn_mul(x, mask);        /* fails: CN_ERR_DEVICE_MISMATCH */\n"
            "// after: create it where x lives\n"
            "cn_tensor *mask = cn_ones(shape, 2, CN_F32, cn_device_of(x));\n"
            "cn_tensor *y = cn_mul(x, mask);",
        .prevention_tips =
            LIST("Never hard-code cn_cpu() inside model code; take a cn_device parameter.",
                 "Move each batch to the model's device once, at the top of the step.",
                 "Run the tests with CINDER_DEVICE set to another backend to catch stray CPU "
                 "tensors."),
    },
    {
        CODE(CN_ERR_NO_KERNEL, 7),
        .slug = "no-kernel",
        PHRASE("backend has no kernel for this op"),
        .documentation =
            "The router validated the inputs and chose the backend they live on, but that "
            "backend's kernel table holds NULL for the op. A backend registered with "
            "cn_backend_register provides exactly the kernels its table fills in, and a "
            "built-in backend may not cover every op yet. cinder does not fall back to "
            "another backend silently, since that would hide a device transfer. The detail "
            "names the op and the backend.",
        .trigger_scenarios =
            "cn_exp on tensors of a custom backend whose kernels[CN_OP_EXP] is NULL; an op "
            "added to cinder after a backend was written (cn_op is append-only, so an older "
            "table has NULL for newer ops); a wrapping backend whose table was built from "
            "scratch instead of copied, leaving entries NULL.",
        .common_situations =
            "Experimental backends implementing only the ops of one model; a GPU backend that "
            "does not implement an op family yet; a wrapper table copied before the wrapped "
            "backend was registered, or edited after cn_backend_register copied it.",
        .solutions =
            LIST("Implement the kernel and set kernels[CN_OP_...] before calling "
                 "cn_backend_register: the table is copied at registration, so later edits have no "
                 "effect.",
                 "As a stopgap, move the inputs to the CPU with cn_to_device, run the op there and "
                 "move the result back.",
                 "When wrapping a backend, start from a full copy, `cn_backend w = "
                 "*cn_backend_get(id);`, and override only the entries you change."),
        .example_fix =
            "// before: registered without exp\n"
            "cn_backend b = my_backend_table();\n"
            "cn_backend_register(&b);               /* later cn_exp: CN_ERR_NO_KERNEL */\n"
            "// after: fill the entry first (the table is copied)\n"
            "cn_backend b = my_backend_table();\n"
            "b.kernels[CN_OP_EXP] = my_exp_kernel;\n"
            "cn_backend_register(&b);",
        .prevention_tips =
            LIST("Run the cross-backend op tests against every backend you register.",
                 "Build wrapper backends from a full copy of an existing table.",
                 "Check the new cn_op values when upgrading cinder and decide for each whether "
                 "your backend implements it."),
    },
    {
        CODE(CN_ERR_OUT_OF_MEMORY, 8),
        .slug = "out-of-memory",
        PHRASE("out of memory"),
        .documentation =
            "An allocation failed: host memory for a tensor or its bookkeeping, or device "
            "memory of a backend such as GPU memory. The failed call leaves its inputs "
            "untouched and frees what it had allocated, so a program can release tensors and "
            "try again. The allocation-failure test mode (cn_alloc_fail_after) raises this "
            "error on purpose to test error paths. The detail says what was being allocated.",
        .trigger_scenarios =
            "cn_zeros of [65536, 65536] f32 (16 GiB) on a machine without that much free "
            "memory; a matmul or conv2d whose output does not fit on the GPU; a training loop "
            "that leaks every intermediate until memory runs out; cn_alloc_fail_after(1) "
            "followed by any tensor creation.",
        .common_situations =
            "Intermediates of each step never released (no scope and no cn_release), visible "
            "as cn_live_tensors() growing every iteration; a batch size or sequence length too "
            "large for the device; references to old losses or activations kept for logging.",
        .solutions =
            LIST("Wrap each step in cn_scope_begin() / cn_scope_end() and cn_keep only what must "
                 "survive the step.",
                 "Watch cn_live_tensors() across iterations: a steady rise is a leak, not a "
                 "capacity problem.",
                 "Reduce the batch size or sequence length, or use a smaller dtype (f16, bf16).",
                 "Release tensors that are no longer needed before creating large ones."),
        .example_fix =
            "// before: every step leaks its intermediates\n"
            "for (int step = 0; step < n; step++) {\n"
            "    cn_tensor *loss = cn_mean(cn_relu(cn_linear(x, w, b)));\n"
            "    log_loss(loss);                    /* eventually CN_ERR_OUT_OF_MEMORY */\n"
            "}\n"
            "// after: a scope releases them at the end of each step\n"
            "for (int step = 0; step < n; step++) {\n"
            "    cn_scope_begin();\n"
            "    cn_tensor *loss = cn_mean(cn_relu(cn_linear(x, w, b)));\n"
            "    log_loss(loss);\n"
            "    cn_scope_end();\n"
            "}",
        .prevention_tips =
            LIST("Use a scope around the body of every loop that creates tensors.",
                 "Assert in tests that cn_live_tensors() is the same before and after a step.",
                 "Test error paths with cn_alloc_fail_after, failing each allocation in turn, to "
                 "prove that failures leak nothing."),
    },
    {
        CODE(CN_ERR_OVERFLOW, 9),
        .slug = "size-overflow",
        PHRASE("size overflows 64 bits"),
        .documentation =
            "A computed size does not fit in a signed 64-bit integer: the element count (the "
            "product of the shape), the byte size, or a stride. Nothing is allocated. No real "
            "data has such a size, so this almost always means a garbage shape: an "
            "uninitialised shape array, a negative number turned huge by unsigned arithmetic, "
            "or an ndim larger than the number of entries actually set.",
        .trigger_scenarios =
            "cn_zeros with shape {1LL << 40, 1LL << 40}; a shape array declared with 4 entries "
            "of which only 2 are set, passed with ndim 4; a size computed as (size_t)0 - 1; "
            "cn_reshape or cn_expand to a shape read from a corrupt file header.",
        .common_situations =
            "Shapes read from files or network messages without validation; ndim out of step "
            "with the shape array; sizes multiplied in int or unsigned before being widened "
            "to int64_t.",
        .solutions = LIST(
            "Look at the shape in the detail and find where each entry came from.",
            "Pass an ndim equal to the number of entries actually set; for a literal array use "
            "sizeof shape / sizeof *shape.",
            "Validate external shapes before creating tensors: every size >= 0 and the product "
            "below a sane limit."),
        .example_fix =
            "// before: ndim says 4, only two sizes are set\n"
            "int64_t shape[4];\n"
            "shape[0] = rows;\n"
            "shape[1] = cols;\n"
            "cn_tensor *t = cn_zeros(shape, 4, CN_F32, dev);  /* garbage: CN_ERR_OVERFLOW */\n"
            "// after\n"
            "const int64_t shape[2] = {rows, cols};\n"
            "cn_tensor *t = cn_zeros(shape, 2, CN_F32, dev);",
        .prevention_tips = LIST(
            "Initialise shape arrays where they are declared and derive ndim from their length.",
            "Keep sizes in int64_t from the start; never multiply sizes in int.",
            "Validate every shape that comes from outside the program."),
    },
    {
        CODE(CN_ERR_UNKNOWN_DEVICE, 10),
        .slug = "unknown-device",
        PHRASE("unknown device"),
        .documentation =
            "A device name does not parse, or names no registered backend. Names have the form "
            "<backend>[:<index>]: \"cpu\", \"cuda\", \"cuda:1\", or the name of a backend "
            "registered with cn_backend_register. A backend that is not registered is looked for "
            "as a module (libcinder_<name>.so, e.g. the CUDA backend's libcinder_cuda.so; "
            "cinder/backend.h lists where); when none is found the name is unknown and the "
            "message lists each place looked at. `cinder info` lists every backend, found or "
            "not, and why. "
            "cn_default_device() sets this error when the CINDER_DEVICE environment variable "
            "holds such a name, and the device it then returns makes every tensor creation "
            "fail with the same error.",
        .trigger_scenarios =
            "cn_device_parse(\"tpu:0\", &d); CINDER_DEVICE=gpu (cinder calls it cuda); a "
            "malformed index such as \"cuda:\" or \"cuda:x\"; CINDER_DEVICE=cuda with a build "
            "that has no CUDA backend; parsing a custom backend's name before "
            "cn_backend_register has run.",
        .common_situations =
            "A typo, or a device name from another framework (\"gpu\", \"mps\", \"cuda0\"); an "
            "environment copied from a machine with a CUDA build; start-up code that parses "
            "the device before registering the program's own backend.",
        .solutions =
            LIST("Run `cinder info` to see the backends this installation has and use one of "
                 "those names.",
                 "Install the backend's module, or set CINDER_BACKEND_PATH to the directory "
                 "that holds libcinder_<name>.so.",
                 "Fix or unset CINDER_DEVICE (unset means the CPU).",
                 "Register custom backends before anything parses their names.",
                 "Check the status of cn_device_parse (or cn_last_status() after "
                 "cn_default_device()) at start-up and fall back explicitly if that is wanted."),
        .example_fix = "// before: status ignored; every later cn_zeros(..., dev) fails\n"
                       "cn_device dev;\n"
                       "cn_device_parse(\"gpu\", &dev);\n"
                       "// after: a name cinder knows, and the status checked once\n"
                       "cn_device dev;\n"
                       "if (cn_device_parse(\"cuda\", &dev) != CN_OK) {\n"
                       "    fprintf(stderr, \"%s; using the CPU\\n\", cn_last_error());\n"
                       "    cn_clear_error();\n"
                       "    dev = cn_cpu();\n"
                       "}",
        .prevention_tips = LIST("Validate the device once at start-up and report the message.",
                                "Use the backend names that `cinder info` prints.",
                                "Register backends before any code parses device names."),
    },
    {
        CODE(CN_ERR_DEVICE_UNAVAILABLE, 11),
        .slug = "device-unavailable",
        PHRASE("device is not available"),
        .documentation =
            "The backend exists in this build, but the requested device cannot be used: its "
            "index is not below the backend's device count, or the backend has no usable "
            "device at all (a CUDA build on a machine with no GPU, no working driver, or GPUs "
            "hidden by CUDA_VISIBLE_DEVICES). The CPU backend has exactly one device, cpu:0. "
            "`cinder info` prints the device count of each backend.",
        .trigger_scenarios =
            "cn_device_parse(\"cpu:3\", &d); \"cuda:1\" on a single-GPU machine; "
            "CINDER_DEVICE=cuda on a CI runner without a GPU; a container started without "
            "access to the host's GPUs.",
        .common_situations =
            "Code developed on a multi-GPU workstation run on a single-GPU machine; containers "
            "without GPU pass-through; device indices counted from 1 instead of 0.",
        .solutions = LIST("Query cn_backend_device_count(\"cuda\") and choose an index below it.",
                          "Fall back to cn_cpu() when the backend has no usable device.",
                          "Fix the environment: driver installed, GPUs visible in the container, "
                          "CUDA_VISIBLE_DEVICES listing the intended GPUs."),
        .example_fix = "// before: assumes a second GPU\n"
                       "cn_device dev;\n"
                       "cn_device_parse(\"cuda:1\", &dev);      /* fails on a one-GPU machine */\n"
                       "// after: choose an index that exists\n"
                       "cn_device dev = cn_cpu();\n"
                       "int n = cn_backend_device_count(\"cuda\");\n"
                       "if (n > 0) {\n"
                       "    char name[32];\n"
                       "    snprintf(name, sizeof name, \"cuda:%d\", n > 1 ? 1 : 0);\n"
                       "    cn_device_parse(name, &dev);\n"
                       "}",
        .prevention_tips = LIST(
            "Query device counts instead of hard-coding indices.",
            "Make the device a setting (CINDER_DEVICE or a command-line flag), not a constant.",
            "Print `cinder info` in CI logs so the available devices are on record."),
    },
    {
        CODE(CN_ERR_BACKEND, 12),
        .slug = "backend-failure",
        PHRASE("backend reported a failure"),
        .documentation =
            "A backend's own operation failed for a reason outside cinder's checks: a GPU "
            "driver or runtime error, a kernel launch failure, a failed copy between host and "
            "device, or a custom kernel that returned cn_set_error(CN_ERR_BACKEND, ...). The "
            "router had already validated devices, kinds, dtypes and shapes, so the cause lies "
            "in the backend or its environment; the detail carries the backend's own text. "
            "Inputs are left untouched, but after a device fault the device itself may be "
            "unusable until the process restarts.",
        .trigger_scenarios =
            "A GPU kernel launch rejected by the driver; an illegal memory access reported "
            "asynchronously at the next synchronize or copy; a custom kernel that returns "
            "CN_ERR_BACKEND for a case it does not handle; a device lost or reset during a run.",
        .common_situations =
            "An asynchronous GPU error surfacing at a later, unrelated op; a custom backend "
            "that rejects input layouts it does not handle (non-contiguous views, broadcast "
            "strides of 0) with this code; a driver too old for the runtime the backend was "
            "built with.",
        .solutions = LIST(
            "Read the detail: it is the backend's message and usually names the runtime's "
            "error.",
            "For GPU errors, make launches synchronous (CUDA_LAUNCH_BLOCKING=1) to find the op "
            "that really failed.",
            "Run the same op on the CPU (cn_to_device) to tell a backend bug from bad input.",
            "In your own backend, handle the case, or reject it with the specific code "
            "(CN_ERR_DTYPE, CN_ERR_SHAPE, ...) and a message that names a way out."),
        .example_fix =
            "// before: a custom kernel reports an unsupported dtype as a backend failure\n"
            "if (a->in[0].dtype != CN_F32)\n"
            "    return cn_set_error(CN_ERR_BACKEND, \"add\", \"failed\");\n"
            "// after: the specific code, and a way out\n"
            "if (a->in[0].dtype != CN_F32)\n"
            "    return cn_set_error(CN_ERR_DTYPE, \"add\", \"%s not supported by mybackend; \"\n"
            "                        \"cast to f32\", cn_dtype_name(a->in[0].dtype));",
        .prevention_tips =
            LIST("In a backend, use CN_ERR_BACKEND only for failures of the device or its runtime.",
                 "Check the result of every runtime call in kernels and turn failures into "
                 "cn_set_error with the runtime's error string.",
                 "Synchronize and check for errors at step boundaries so that faults are reported "
                 "near their cause."),
    },
    {
        CODE(CN_ERR_INDEX, 13),
        .slug = "index-out-of-range",
        PHRASE("index out of range"),
        .documentation =
            "An index tensor holds a value outside the dimension it indexes. cn_gather, "
            "cn_scatter_add and cn_index_select need every index in [0, size) of the indexed "
            "dim of x; cn_one_hot needs every index in [0, num_classes). The check is on the "
            "values, so the kernel reports it after the shape checks have passed. The detail "
            "names the op and the valid range.",
        .trigger_scenarios =
            "cn_index_select(x, 0, idx) where dim 0 of x has size 3 and idx holds 99; "
            "cn_one_hot(labels, 10, CN_F32) with a label 10 (labels numbered from 1); "
            "cn_gather with -1 used as a padding index; cn_scatter_add with token ids from a "
            "larger vocabulary than the table.",
        .common_situations =
            "Labels numbered from 1 instead of 0; padding or ignore markers (-1, -100) left "
            "in an index tensor; a class count or vocabulary size changed in one place but not "
            "in another; indices computed for the full dataset applied to a slice of it.",
        .solutions =
            LIST("Find the range of the index values (cn_max and cn_min of the index tensor) and "
                 "compare it with the size of the indexed dim.",
                 "Shift 1-based labels to 0-based: cn_add_scalar(labels, -1).",
                 "Remove padding indices before indexing, or replace them with a valid index and "
                 "mask the result.",
                 "Take the class count or vocabulary size from one constant."),
        .example_fix =
            "// before: labels are 1..10\n"
            "cn_tensor *y = cn_one_hot(labels, 10, CN_F32);   /* fails: CN_ERR_INDEX */\n"
            "// after: make them 0-based first\n"
            "cn_tensor *labels0 = cn_add_scalar(labels, -1);\n"
            "cn_tensor *y = cn_one_hot(labels0, 10, CN_F32);",
        .prevention_tips = LIST("Validate label and token ranges once, when the dataset is loaded.",
                                "Keep class counts and vocabulary sizes in one place.",
                                "Use 0-based indices throughout, as C and cinder do."),
    },
    {
        CODE(CN_ERR_SCOPE, 14),
        .slug = "scope-misuse",
        PHRASE("scope API misused"),
        .documentation =
            "The scope API was used out of order: cn_scope_end() with no scope open on this "
            "thread, or cn_keep() outside any scope. Scopes are per thread and nest: each "
            "cn_scope_begin() must be matched by exactly one cn_scope_end() on the same "
            "thread. Tensors returned while a scope is open belong to the innermost scope and "
            "are released by its cn_scope_end(); cn_keep hands one to the enclosing scope, or "
            "to the caller at the outermost level.",
        .trigger_scenarios =
            "cn_scope_end() with no cn_scope_begin() before it; two cn_scope_end() calls for "
            "one cn_scope_begin() (an error path ends the scope, then falls through to the "
            "normal end); a scope begun on one thread and ended on another, whose own stack "
            "is empty.",
        .common_situations =
            "Error-handling branches that end the scope and then reach the normal end too; a "
            "helper function ending a scope its caller began; worker threads ending scopes "
            "opened by the main thread.",
        .solutions =
            LIST("Pair each cn_scope_begin() with one cn_scope_end() in the same function, on a "
                 "single exit path (a `goto out` label works well).",
                 "Compare cn_scope_depth() at function entry and exit in debug builds.",
                 "End every scope on the thread that began it."),
        .example_fix =
            "// before: the error branch ends the scope, then the normal path ends it again\n"
            "cn_scope_begin();\n"
            "cn_tensor *y = cn_relu(x);\n"
            "if (!y) cn_scope_end();\n"
            "cn_scope_end();                         /* fails: CN_ERR_SCOPE when y is NULL */\n"
            "// after: one exit path\n"
            "cn_scope_begin();\n"
            "cn_tensor *y = cn_keep(cn_relu(x));\n"
            "cn_scope_end();\n"
            "if (!y) return -1;",
        .prevention_tips = LIST("One begin and one end per function, on one exit path.",
                                "Assert in tests that cn_scope_depth() is 0 after each step.",
                                "Do not share scopes across threads."),
    },
    {
        CODE(CN_ERR_BUFFER, 15),
        .slug = "buffer-size-mismatch",
        PHRASE("buffer has the wrong size"),
        .documentation =
            "A buffer handed to cinder does not have the size the call needs. cn_read copies "
            "numel * cn_dtype_size(dtype) bytes in row-major order and requires nbytes to be "
            "exactly that: a smaller buffer would be overrun, and a larger one usually means "
            "the caller expects another dtype or shape. cn_split and cn_chunk write one tensor "
            "per piece into `parts` and fail this way when max_parts is smaller than the "
            "number of pieces. The detail gives the size needed and the size passed.",
        .trigger_scenarios =
            "cn_read(t, out, sizeof out) with `double out[6]` and t an f32 [2, 3] tensor (48 "
            "bytes passed, 24 needed); reading a [B, C] tensor into a buffer sized for one row; "
            "passing sizeof of a pointer (8) as the size of a heap buffer; reading after a "
            "reshape or reduction changed the element count; cn_split of a dim of size 10 in "
            "pieces of 3 (4 pieces) into a parts array with max_parts = 3.",
        .common_situations =
            "sizeof applied to a pointer parameter; assuming doubles when tensors are f32; a "
            "buffer sized from an old shape after the model changed.",
        .solutions =
            LIST("Compute the size from the tensor: (size_t)cn_numel(t) * "
                 "cn_dtype_size(cn_dtype_of(t)).",
                 "To read in another element type, cn_cast the tensor first, then read the cast "
                 "tensor.",
                 "Allocate the buffer from that computed size instead of from assumptions.",
                 "For cn_split / cn_chunk, size `parts` for ceil(size of dim / piece size) pieces "
                 "and pass that count as max_parts."),
        .example_fix = "// before: t is f32 [2, 3], the buffer holds doubles\n"
                       "double out[6];\n"
                       "cn_read(t, out, sizeof out);            /* fails: CN_ERR_BUFFER */\n"
                       "// after: read it as f64, sized from the tensor\n"
                       "cn_tensor *t64 = cn_cast(t, CN_F64);\n"
                       "cn_read(t64, out, (size_t)cn_numel(t64) * cn_dtype_size(CN_F64));\n"
                       "cn_release(t64);",
        .prevention_tips = LIST("Always compute nbytes from cn_numel and cn_dtype_size.",
                                "Check cn_dtype_of before reading into a typed buffer.",
                                "Never take sizeof of a pointer to size a buffer."),
    },
    {
        CODE(CN_ERR_AUTODIFF_DEVICE, 16),
        .slug = "autodiff-concrete-device",
        PHRASE("tensor is not on an autodiff device"),
        .documentation =
            "An autodiff call was given a tensor that lives on a concrete device (cn_cpu(), a "
            "CUDA device), where no graph is recorded: cn_require_grad cannot make it a leaf, "
            "and cn_from_inner needs a concrete tensor plus the autodiff device over that same "
            "device. Gradients exist only for tensors on cn_autodiff(device).",
        .trigger_scenarios =
            "cn_require_grad on a tensor made with cn_cpu(); cn_from_inner(t, cn_cpu()) with a "
            "concrete target; cn_from_inner of a tensor that is already on an autodiff device.",
        .common_situations =
            "Creating parameters on cn_default_device() and forgetting to wrap the device in "
            "cn_autodiff; loading weights from a file onto the concrete device.",
        .solutions = LIST("Create trainable tensors on cn_autodiff(device).",
                          "Move an existing tensor with cn_to_device(t, cn_autodiff(device)) or "
                          "view it there with cn_from_inner(t, cn_autodiff(cn_device_of(t))).",
                          "Pass cn_from_inner the autodiff device over the tensor's own device."),
        .example_fix = "// before\n"
                       "cn_tensor *w = cn_require_grad(cn_zeros(s, 2, CN_F32, cn_cpu())); /* fails */\n"
                       "// after\n"
                       "cn_device ad = cn_autodiff(cn_cpu());\n"
                       "cn_tensor *w = cn_require_grad(cn_zeros(s, 2, CN_F32, ad));",
        .prevention_tips = LIST("Keep one `cn_device train_dev = cn_autodiff(...)` and create "
                                "every parameter on it.",
                                "Load checkpoints on the concrete device, then cn_from_inner."),
    },
    {
        CODE(CN_ERR_AUTODIFF_NO_GRAD, 17),
        .slug = "autodiff-no-gradient",
        PHRASE("tensor has no gradient"),
        .documentation =
            "A gradient was asked of a tensor that has none: cn_backward on a root that is not "
            "tracked (no input required grad, or it was computed under no-grad mode), cn_grad of "
            "a tensor that did not take part in the graph behind the root, or cn_retain_grad on "
            "an untracked tensor. PyTorch returns None for such gradients; cinder says so.",
        .trigger_scenarios =
            "cn_backward(loss) where no parameter was marked with cn_require_grad; a loss "
            "computed between cn_no_grad_begin and cn_no_grad_end; cn_grad(grads, b) for a "
            "parameter b that the loss does not depend on; cn_grad of a tensor after "
            "cn_grad_remove took its gradient.",
        .common_situations =
            "Forgetting cn_require_grad on new parameters; evaluating the loss inside the "
            "no-grad block of an optimizer step; a branch of the model that was skipped.",
        .solutions = LIST("Mark the leaves with cn_require_grad before the forward pass.",
                          "Compute the training loss outside no-grad mode.",
                          "Check that the loss really depends on the tensor you ask about; "
                          "a parameter the loss ignores has no gradient."),
        .example_fix = "// before\n"
                       "cn_tensor *w = cn_zeros(s, 2, CN_F32, ad);\n"
                       "cn_grads *g = cn_backward(cn_sum(cn_mul(w, x)));   /* fails */\n"
                       "// after\n"
                       "cn_tensor *w = cn_require_grad(cn_zeros(s, 2, CN_F32, ad));\n"
                       "cn_grads *g = cn_backward(cn_sum(cn_mul(w, x)));",
        .prevention_tips = LIST("Check cn_requires_grad(loss) in debug builds before backward.",
                                "Keep no-grad blocks short: only evaluation and updates."),
    },
    {
        CODE(CN_ERR_AUTODIFF_MODIFIED, 18),
        .slug = "autodiff-saved-tensor-modified",
        PHRASE("a tensor saved for backward was modified in place"),
        .documentation =
            "A value that a recorded op saved for its backward formula was overwritten in place "
            "(cn_copy_) before cn_backward ran. Every storage carries a version counter that "
            "in-place writes bump; backward compares it with the version seen when the op was "
            "recorded and refuses to compute a gradient from the new contents, which would be "
            "silently wrong. Nothing is consumed: the graph and all tensors are as before.",
        .trigger_scenarios =
            "y = cn_mul(w, x); cn_copy_(x, other) under no-grad; cn_backward(y); an optimizer "
            "step between the forward pass and cn_backward; updating a running statistic in "
            "place that the forward pass also used.",
        .common_situations =
            "Stepping the optimizer before backward; reusing a preallocated input buffer for the "
            "next batch while the previous graph is still alive.",
        .solutions = LIST("Run cn_backward before any in-place update of its inputs.",
                          "Write the new values into a fresh tensor instead of in place.",
                          "Recompute the forward pass after the in-place update."),
        .example_fix = "// before\n"
                       "cn_tensor *loss = cn_sum(cn_mul(w, x));\n"
                       "cn_no_grad_begin(); cn_copy_(x, next_batch); cn_no_grad_end();\n"
                       "cn_backward(loss);                        /* fails */\n"
                       "// after\n"
                       "cn_grads *g = cn_backward(loss);\n"
                       "cn_no_grad_begin(); cn_copy_(x, next_batch); cn_no_grad_end();",
        .prevention_tips = LIST("Order each step as forward, backward, then updates.",
                                "Treat tensors used in a live graph as read-only."),
    },
    {
        CODE(CN_ERR_AUTODIFF_GRAPH, 19),
        .slug = "autodiff-graph-freed",
        PHRASE("the graph was already freed by a backward"),
        .documentation =
            "cn_backward consumes the graph it runs through: once it succeeds, the values saved "
            "for backward are released so that memory stays flat across training steps. A second "
            "backward through any part of that graph has nothing to compute from. Leaves are "
            "never consumed; only recorded ops are.",
        .trigger_scenarios =
            "Calling cn_backward twice on the same loss; a new loss that reuses an intermediate "
            "(not a leaf) from a graph an earlier backward consumed.",
        .common_situations =
            "Accumulating gradients by calling backward on one loss several times; keeping an "
            "activation across steps and feeding it into the next step's graph.",
        .solutions = LIST("Run the forward pass again before each backward.",
                          "To backward through two losses, add them and call cn_backward once.",
                          "Pass values across steps as detached tensors (cn_detach)."),
        .example_fix = "// before\n"
                       "cn_grads *g1 = cn_backward(loss);\n"
                       "cn_grads *g2 = cn_backward(loss);         /* fails */\n"
                       "// after\n"
                       "cn_grads *g = cn_backward(cn_add(loss_a, loss_b));",
        .prevention_tips = LIST("One forward, one backward.",
                                "cn_detach state that is carried from step to step."),
    },
    {
        CODE(CN_ERR_AUTODIFF_INPLACE, 20),
        .slug = "autodiff-inplace-on-tracked",
        PHRASE("in-place write to a tracked tensor"),
        .documentation =
            "cn_copy_ was asked to overwrite a tensor that the autodiff layer tracks while "
            "gradients are being recorded. An in-place write cannot be recorded as an op of the "
            "graph, so the tensor's gradient would silently lose it. Updates of parameters "
            "belong in no-grad mode, where nothing is recorded.",
        .trigger_scenarios =
            "cn_copy_(w, w_new) for a parameter w marked with cn_require_grad, outside "
            "cn_no_grad_begin/cn_no_grad_end; cn_copy_ into an intermediate of the graph.",
        .common_situations =
            "Writing an optimizer step without the no-grad block; clamping weights in place "
            "during the forward pass.",
        .solutions = LIST("Wrap parameter updates in cn_no_grad_begin() / cn_no_grad_end().",
                          "Inside the forward pass, use out-of-place ops (cn_clamp returns a new "
                          "tensor)."),
        .example_fix = "// before\n"
                       "cn_copy_(w, cn_sub(w, cn_mul_scalar(dw, lr)));  /* fails */\n"
                       "// after\n"
                       "cn_no_grad_begin();\n"
                       "cn_copy_(w, cn_sub(w, cn_mul_scalar(dw, lr)));\n"
                       "cn_no_grad_end();",
        .prevention_tips = LIST("Every optimizer step runs in no-grad mode.",
                                "Never write in place to a tensor a graph may use."),
    },
    {
        CODE(CN_ERR_AUTODIFF_REACHED_CONCRETE, 21),
        .slug = "autodiff-float-input-reached-concrete-dispatch",
        PHRASE("autodiff float input reached concrete dispatch"),
        .documentation =
            "An autodiff-tracked float tensor was about to be handed to a concrete kernel: an "
            "extension op that has no backward (and was not declared non-differentiable) was "
            "called with a tracked input, or a call forced onto the concrete route received one. "
            "Running the kernel would drop the input's gradient without a word, so the router "
            "refuses; this is the invariant that burn's generated dispatch guards with the same "
            "message.",
        .trigger_scenarios =
            "Calling an extension op registered with kernels only (no cn_ext_register_backward) "
            "on a tensor computed from a cn_require_grad leaf; cn_ext_call with "
            "CN_EXT_ROUTE_CONCRETE and a tracked input; calling a concrete-only extension op "
            "inside a training step.",
        .common_situations =
            "Inference-only fused kernels reused in training; a backward registered for one "
            "build but not linked in another; handing tensors from a tracked region to "
            "concrete-only code.",
        .solutions = LIST("Detach the input to its concrete tensor before the call: cn_inner(t) "
                          "(or cn_detach(t) to stay on the autodiff device untracked).",
                          "Register a backward for the op (cn_ext_register_backward, or list "
                          "`autodiff` in its cinder-extgen declaration) so it runs on the "
                          "autodiff route.",
                          "Restructure so differentiating tensors stay inside tracked code and "
                          "only detached values reach concrete-only ops.",
                          "If the op truly has no gradient, declare it CN_EXT_NON_DIFFERENTIABLE."),
        .example_fix = "// before\n"
                       "y = myext_fast_norm(h);            /* h tracked: fails */\n"
                       "// after: strip the autodiff wrapper\n"
                       "cn_tensor *inner = cn_inner(h);\n"
                       "y = myext_fast_norm(inner);",
        .prevention_tips = LIST("Keep differentiating tensors inside grad-tracked call paths.",
                                "Detach autodiff tensors before handing them to inference or "
                                "concrete-only ops.",
                                "Give every op used in training a backward."),
    },
    {
        CODE(CN_ERR_AUTODIFF_NONFLOAT, 22),
        .slug = "autodiff-primitive-on-non-float",
        PHRASE("only float tensors may use an autodiff primitive"),
        .documentation =
            "An int or bool input carries an autodiff primitive (a graph node). Only float "
            "tensors are tracked: int and bool tensors on an autodiff device stay plain and "
            "keep only the device. Seeing a node on one means the tensor was built or altered "
            "outside the public API, or that a float tensor was passed where the op's schema "
            "declares an int or bool input.",
        .trigger_scenarios =
            "An extension op declares input `ids` as int and a tracked float is passed there; a "
            "tensor header patched by hand to carry a node.",
        .common_situations = "Arguments passed in the wrong order to an extension op; a "
                             "hand-written wrapper that reuses tensor internals.",
        .solutions = LIST("Pass the int/bool tensor the schema asks for (cn_cast to an int "
                          "dtype, which drops tracking).",
                          "Check the argument order against the op's declaration."),
        .example_fix = "// before\n"
                       "myext_embed(logits, table);       /* ids slot gets a tracked float */\n"
                       "// after\n"
                       "myext_embed(cn_cast(labels, CN_I64), table);",
        .prevention_tips = LIST("Use the generated typed functions: their parameter names say "
                                "which input is which.",
                                "Never edit tensor internals."),
    },
    {
        CODE(CN_ERR_AUTODIFF_PLAIN_ENABLED, 23),
        .slug = "autodiff-enabled-float-without-primitive",
        PHRASE("an enabled float tensor must use an autodiff primitive"),
        .documentation =
            "A float input is a plain (concrete) primitive but carries an enabled autodiff "
            "context: its device has a checkpointing strategy set without the autodiff flag. "
            "Such a tensor cannot be lifted as a constant (its context says it belongs to a "
            "tracked device) nor tracked (it has no node). It comes from a cn_device value "
            "written by hand. On the autodiff route, ordinary plain floats are lifted as "
            "constants; this error is only for such malformed inputs.",
        .trigger_scenarios =
            "A device built as (cn_device){0, 0, 0, CN_CHECKPOINT_BALANCED} and used to create "
            "a tensor that is then passed to an op.",
        .common_situations = "Initialising cn_device structs field by field instead of with "
                             "cn_autodiff_checkpointed.",
        .solutions = LIST("Build autodiff devices with cn_autodiff(inner) or "
                          "cn_autodiff_checkpointed(inner, strategy).",
                          "For a concrete device, use cn_cpu() or cn_inner_device(d), which "
                          "clear both autodiff fields."),
        .example_fix = "// before\n"
                       "cn_device d = {0, 0, 0, CN_CHECKPOINT_BALANCED};\n"
                       "// after\n"
                       "cn_device d = cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED);",
        .prevention_tips = LIST("Treat cn_device as a value made by cinder's constructors.",
                                "Compare devices with cn_device_eq, never field by field."),
    },
    {
        CODE(CN_ERR_EXT_MIXED_TRACKING, 24),
        .slug = "extension-mixed-tracking",
        PHRASE("tracked and untracked float inputs are mixed"),
        .documentation =
            "An extension op declared CN_EXT_SAME_TRACKING (its float inputs must be all tracked "
            "or all untracked, e.g. because its backward assumes it) received some tracked and "
            "some untracked float inputs. The detail names one input of each kind.",
        .trigger_scenarios = "Calling such an op with a parameter marked cn_require_grad and a "
                             "plain float or detached tensor.",
        .common_situations = "Forgetting cn_require_grad on one of several parameters; passing "
                             "a cn_detach'ed copy by mistake.",
        .solutions = LIST("Mark every float input that should train with cn_require_grad.",
                          "Or detach all of them (cn_detach) for an untracked call."),
        .example_fix = "// before\n"
                       "myext_pair(w_tracked, v_plain);   /* fails */\n"
                       "// after\n"
                       "myext_pair(w_tracked, cn_require_grad(v_plain_on_ad_device));",
        .prevention_tips = LIST("Create all parameters of a module the same way.",
                                "Check cn_requires_grad on each input in debug builds."),
    },
    {
        CODE(CN_ERR_EXT_NO_TENSOR, 25),
        .slug = "extension-no-tensor-input",
        PHRASE("no tensor input to choose a backend from"),
        .documentation =
            "The router picks the backend from the op's tensor inputs, walking them in order for "
            "a representative (a float first). This call had none: every optional input was NULL "
            "and every union was on a variant that holds no tensor.",
        .trigger_scenarios = "An op whose only input is a union, called with its tensor-less "
                             "variant; all optional inputs passed as NULL.",
        .common_situations = "A `none` variant used for every argument at once.",
        .solutions = LIST("Pass at least one tensor (it also fixes the device the outputs go "
                          "to).",
                          "Give the op a required tensor input in its declaration."),
        .example_fix = "// before\n"
                       "myext_mask(MYEXT_MASK_NONE, NULL); /* fails */\n"
                       "// after\n"
                       "myext_mask(MYEXT_MASK_DENSE, mask);",
        .prevention_tips = LIST("Every op should have one required tensor input.",
                                "Test each union variant of an op, including tensor-less ones."),
    },
    {
        CODE(CN_ERR_CHECKPOINT_MISMATCH, 26),
        .slug = "checkpoint-strategy-mismatch",
        PHRASE("inputs use different checkpointing strategies"),
        .documentation =
            "Two inputs live on autodiff devices over the same backend but with different "
            "checkpointing strategies (cn_autodiff vs cn_autodiff_checkpointed). One graph has "
            "one strategy, so the router refuses to mix them; the detail names both tensors.",
        .trigger_scenarios = "Adding a tensor from cn_autodiff(cn_cpu()) to one from "
                             "cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED).",
        .common_situations = "Parameters created on one device and data batches on another.",
        .solutions = LIST("Create all tensors of a model on one autodiff device value.",
                          "Move one with cn_to_device(t, other_device)."),
        .example_fix = "// before\n"
                       "cn_add(w_on_balanced, x_on_plain_autodiff);   /* fails */\n"
                       "// after\n"
                       "cn_add(w_on_balanced, cn_to_device(x_on_plain_autodiff, balanced));",
        .prevention_tips = LIST("Keep one training device value and pass it around.",
                                "Create data batches on the same device as the parameters."),
    },
    {
        CODE(CN_ERR_IO, 27),
        .slug = "file-io",
        PHRASE("a file is missing, unreadable, truncated or corrupt"),
        .documentation =
            "A call that reads or writes a file (cn_safetensors_save, cn_safetensors_load, "
            "cn_safetensors_load_into, cn_idx_load, cn_fashion_mnist_load) could not open it, "
            "could not read or write it, or found content that breaks the file's format. "
            "Readers validate a file completely before they make any tensor, so a failure "
            "leaves nothing half-loaded. The detail names the file, the byte offset (in the "
            "file, in a safetensors header, or in the decompressed stream of a .gz file) and "
            "the field that is wrong, what was expected there, and what to do: a cut-short file "
            "reports where it ends and how many bytes were due.",
        .trigger_scenarios =
            "cn_safetensors_load(\"missing.safetensors\", cn_cpu(), &h); loading a checkpoint "
            "whose copy was interrupted (truncated), whose JSON header was edited by hand, or "
            "whose dtype cinder lacks (\"I8\", \"F8_E4M3\"); cn_idx_load on a file that is not "
            "IDX (bad magic) or whose dims promise more data than it holds; "
            "cn_fashion_mnist_load on a machine without the data set; cn_safetensors_save into "
            "a directory that does not exist or is read-only.",
        .common_situations =
            "A relative path resolved against another working directory; a download or copy "
            "that stopped early (a full disk, an interrupted scp); a .gz file saved under the "
            "uncompressed name or the reverse (both are accepted, but a gzip stream cut short "
            "is not); checkpoints exported from another framework with a dtype cinder does not "
            "have; a training job that saves into a directory it never created.",
        .solutions =
            LIST("Read the detail: it names the file and the byte or field at fault; check the "
                 "path (an absolute one rules out the working directory) and the file's size "
                 "(`ls -l`) against what the message expected.",
                 "Re-create the file: save the checkpoint again, or download the data again "
                 "(Fashion-MNIST: `apt-get install dataset-fashion-mnist`, or scripts/demo.sh).",
                 "For a checkpoint from another framework, convert its tensors to a dtype cinder "
                 "has (F32, F64, F16, BF16, I32, I64, U8, BOOL) before saving it."),
        .example_fix = "// before\n"
                       "cn_safetensors *h;\n"
                       "cn_safetensors_load(\"model.safetensors\", cn_cpu(), &h); /* fails: "
                       "not found */\n"
                       "// after: save first, and check the status\n"
                       "cn_safetensors_save(\"model.safetensors\", names, params, n);\n"
                       "if (cn_safetensors_load(\"model.safetensors\", cn_cpu(), &h) != CN_OK)\n"
                       "    fprintf(stderr, \"%s\\n\", cn_last_error());",
        .prevention_tips =
            LIST("Check the status of every save and load; a failed save leaves the previous "
                 "checkpoint in place.",
                 "Build paths from one configured directory, and create it before saving.",
                 "Keep data sets where the loaders look by default (CN_FASHION_MNIST_DIR) or "
                 "pass the directory explicitly."),
    },
};

#define CATALOGUE_SIZE (sizeof catalogue / sizeof *catalogue)

/* One row per code, CN_ERR_NULL_ARG (1) first and in order: a new code in error.h without a row
 * (or a row without a code) stops the build here. */
_Static_assert(CATALOGUE_SIZE == (size_t)CN_STATUS_COUNT - 1,
               "every cn_status except CN_OK needs exactly one row in the catalogue");

/* ---- access --------------------------------------------------------------------------------- */

const cn_error_entry *cn_error_entry_of(cn_status s) {
    if ((int)s < 1 || (size_t)s > CATALOGUE_SIZE) return NULL;
    const cn_error_entry *e = &catalogue[(size_t)s - 1];
    return e->status == s ? e : NULL; /* rows out of order: caught by the tests */
}

size_t cn_error_catalogue(const cn_error_entry **entries) {
    if (entries) *entries = catalogue;
    return CATALOGUE_SIZE;
}

const char *cn__status_phrase(cn_status s) {
    const cn_error_entry *e = cn_error_entry_of(s);
    return e ? e->phrase : "";
}

/* ---- matching ------------------------------------------------------------------------------- */

/* Length of the placeholder "{name}" starting at p, or 0 if p does not start one. */
static size_t placeholder_len(const char *p) {
    if (*p != '{') return 0;
    const char *q = p + 1;
    while (*q && *q != '}' && *q != '{')
        q++;
    return *q == '}' && q > p + 1 ? (size_t)(q - p) + 1 : 0;
}

/* Glob matching of msg[0, n) against pattern, with placeholders as "any text". On a mismatch the
 * last placeholder absorbs one more character and matching resumes after it; literal runs never
 * need deeper backtracking, so this is O(n * pattern length) at worst. */
static int pattern_matches(const char *pattern, const char *msg, size_t n) {
    const char *p = pattern;
    size_t m = 0;
    const char *star_p = NULL; /* pattern position just after the last placeholder */
    size_t star_m = 0;         /* message position that placeholder currently extends to */
    while (m < n) {
        size_t ph = placeholder_len(p);
        if (ph) {
            p += ph;
            star_p = p;
            star_m = m;
        } else if (*p && *p == msg[m]) {
            p++;
            m++;
        } else if (star_p) {
            p = star_p;
            m = ++star_m;
        } else {
            return 0;
        }
    }
    for (size_t ph; (ph = placeholder_len(p)) != 0;)
        p += ph;
    return *p == '\0';
}

int cn_error_message_matches(const cn_error_entry *entry, const char *message) {
    if (!entry || !message || !entry->message_pattern) return 0;
    return pattern_matches(entry->message_pattern, message, strlen(message));
}

/* ---- lookup --------------------------------------------------------------------------------- */

static int equals_nocase(const char *a, size_t n, const char *b) {
    for (size_t i = 0; i < n; i++, b++) {
        if (*b == '\0' || tolower((unsigned char)a[i]) != tolower((unsigned char)*b)) return 0;
    }
    return *b == '\0';
}

/* Offset of needle in s[0, n), or -1. */
static long find_in(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    if (k == 0) return -1;
    for (size_t i = 0; i + k <= n; i++) {
        if (memcmp(s + i, needle, k) == 0) return (long)i;
    }
    return -1;
}

/* The entry whose phrase occurs earliest in s[0, n) among those accepted by `want` (all when
 * want is NULL); ties go to the longer phrase. */
static const cn_error_entry *earliest_phrase(const char *s, size_t n, const char *want) {
    const cn_error_entry *best = NULL;
    long best_at = -1;
    for (size_t i = 0; i < CATALOGUE_SIZE; i++) {
        const cn_error_entry *e = &catalogue[i];
        if (want && !want[i]) continue;
        long at = find_in(s, n, e->phrase);
        if (at < 0) continue;
        if (!best || at < best_at || (at == best_at && strlen(e->phrase) > strlen(best->phrase))) {
            best = e;
            best_at = at;
        }
    }
    return best;
}

const cn_error_entry *cn_error_lookup(const char *query) {
    if (!query) return NULL;
    const char *s = query;
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (n == 0) return NULL;

    /* a code number */
    size_t digits = 0;
    while (digits < n && isdigit((unsigned char)s[digits]))
        digits++;
    if (digits == n) {
        long code = 0;
        for (size_t i = 0; i < n && code < 1000000; i++)
            code = code * 10 + (s[i] - '0');
        return code < 1000000 ? cn_error_entry_of((cn_status)code) : NULL;
    }

    /* a name, an error_code, a slug */
    for (size_t i = 0; i < CATALOGUE_SIZE; i++) {
        const cn_error_entry *e = &catalogue[i];
        if (equals_nocase(s, n, e->name) || equals_nocase(s, n, e->error_code) ||
            equals_nocase(s, n, e->slug))
            return e;
    }

    /* a whole message */
    char matched[CATALOGUE_SIZE];
    int any = 0;
    for (size_t i = 0; i < CATALOGUE_SIZE; i++) {
        matched[i] = (char)pattern_matches(catalogue[i].message_pattern, s, n);
        any |= matched[i];
    }
    if (any) {
        const cn_error_entry *e = earliest_phrase(s, n, matched);
        if (e) return e;
        for (size_t i = 0; i < CATALOGUE_SIZE; i++) {
            if (matched[i]) return &catalogue[i];
        }
    }

    /* text that contains a phrase */
    return earliest_phrase(s, n, NULL);
}

//! The structural key of a runtime's own IR: a 22-node decoder layer
//! (SmolLM2-135M shapes, decode M=1) held in the runtime's own node structs,
//! keyed three ways in the same run:
//!
//! - **builder**: `GraphKeyBuilder`, walking the runtime's nodes once
//!   (attributes appended as they are, no per-node allocation once warm);
//! - **prebuilt**: `graph_key` on `ccache::Node`s made once, outside the
//!   timing (the baseline: the hash alone, as if the runtime's IR were the
//!   crate's);
//! - **hash alone**: `ffi::ccache_fp_graph` on C nodes made once (what
//!   any way of keying the graph costs at least);
//! - **adapter**: what a runtime does without the builder, per call:
//!   serialise each node's attributes, build `TensorType`/`Ref`/`Node`
//!   vectors, then `graph_key`.
//!
//! Prints bench/run's table rows (ns per graph, median ratio [min, max] over
//! the repetitions); target: builder ≤ 1.2× prebuilt.  Exits 1 if the
//! builder's key differs from graph_key's.  `--quick`: a short run.

use ccache::{ffi, graph_key, GraphKeyBuilder, Key, Node, Op, Ref, TensorType};
use std::ffi::CString;
use std::time::Instant;

fn black_box<T: Copy>(x: T) -> T {
    // SAFETY: reads a valid, initialised local.
    unsafe { std::ptr::read_volatile(&x) }
}

// ---- The runtime's own IR (what an RLX-style runtime keeps) ----
#[derive(Clone, Copy, PartialEq, Eq)]
enum RtOp {
    Input,
    RmsNorm,
    MatMul,
    Rope,
    Reshape,
    Transpose,
    Scale,
    Softmax,
    Add,
    Silu,
}

impl RtOp {
    fn name(self) -> &'static str {
        match self {
            RtOp::Input => "input",
            RtOp::RmsNorm => "rms_norm",
            RtOp::MatMul => "matmul",
            RtOp::Rope => "rope",
            RtOp::Reshape => "reshape",
            RtOp::Transpose => "transpose",
            RtOp::Scale => "scale",
            RtOp::Softmax => "softmax",
            RtOp::Add => "add",
            RtOp::Silu => "silu",
        }
    }
}

struct RtNode {
    op: RtOp,
    inputs: Vec<usize>,
    dtype: i32,
    shape: Vec<i64>,
    /// The op's attributes: a weight id, an epsilon, an axis, a flag.
    weight: Option<u64>,
    eps: Option<f64>,
    axis: Option<i64>,
    transpose_b: bool,
    param: Option<u32>,
}

fn decoder_layer() -> Vec<RtNode> {
    let n = |op, inputs: &[usize], shape: &[i64]| RtNode {
        op,
        inputs: inputs.to_vec(),
        dtype: 1,
        shape: shape.to_vec(),
        weight: None,
        eps: None,
        axis: None,
        transpose_b: false,
        param: None,
    };
    let mm = |inputs: &[usize], shape: &[i64], w: u64| RtNode { weight: Some(w), transpose_b: true, ..n(RtOp::MatMul, inputs, shape) };
    vec![
        RtNode { param: Some(0), ..n(RtOp::Input, &[], &[1, 576]) },                // 0 x
        RtNode { eps: Some(1e-5), weight: Some(1), ..n(RtOp::RmsNorm, &[0], &[1, 576]) }, // 1
        mm(&[1], &[1, 576], 2),                                                      // 2 q
        mm(&[1], &[1, 192], 3),                                                      // 3 k
        mm(&[1], &[1, 192], 4),                                                      // 4 v
        RtNode { axis: Some(-1), ..n(RtOp::Rope, &[2], &[1, 576]) },                 // 5
        RtNode { axis: Some(-1), ..n(RtOp::Rope, &[3], &[1, 192]) },                 // 6
        n(RtOp::Reshape, &[5], &[9, 1, 64]),                                         // 7
        n(RtOp::Reshape, &[6], &[3, 1, 64]),                                         // 8
        n(RtOp::Reshape, &[4], &[3, 1, 64]),                                         // 9
        RtNode { axis: Some(1), ..n(RtOp::Transpose, &[8], &[3, 64, 1]) },           // 10
        n(RtOp::MatMul, &[7, 10], &[9, 1, 65]),                                      // 11 scores
        RtNode { eps: Some(0.125), ..n(RtOp::Scale, &[11], &[9, 1, 65]) },           // 12
        RtNode { axis: Some(-1), ..n(RtOp::Softmax, &[12], &[9, 1, 65]) },           // 13
        n(RtOp::MatMul, &[13, 9], &[9, 1, 64]),                                      // 14
        n(RtOp::Reshape, &[14], &[1, 576]),                                          // 15
        mm(&[15], &[1, 576], 5),                                                     // 16 o
        n(RtOp::Add, &[0, 16], &[1, 576]),                                           // 17
        RtNode { eps: Some(1e-5), weight: Some(6), ..n(RtOp::RmsNorm, &[17], &[1, 576]) }, // 18
        mm(&[18], &[1, 1536], 7),                                                    // 19 gate
        n(RtOp::Silu, &[19], &[1, 1536]),                                            // 20
        mm(&[20], &[1, 576], 8),                                                     // 21 down
    ]
}

/// Keys the runtime's nodes through the builder: one pass, attributes as they are.
#[inline(never)]
fn key_with_builder(g: &mut GraphKeyBuilder, nodes: &[RtNode]) -> Key {
    for n in nodes {
        g.begin(Op::Name(n.op.name()));
        if let Some(w) = n.weight {
            g.attr_u64(w);
        }
        if let Some(e) = n.eps {
            g.attr_f64(e);
        }
        if let Some(a) = n.axis {
            g.attr_i64(a);
        }
        if n.transpose_b {
            g.attr_u64(1);
        }
        for &i in &n.inputs {
            g.input(Ref { node: i as u32, slot: 0 });
        }
        g.output(n.dtype, &n.shape);
        if let Some(p) = n.param {
            g.set_param(p);
        }
    }
    g.finish(&[Ref { node: nodes.len() as u32 - 1, slot: 0 }], "cpu").expect("builder key")
}

/// The same attribute framing as the builder's attr_* calls (tag, 8 bytes LE).
fn attr_bytes(n: &RtNode) -> Vec<u8> {
    let mut v = Vec::new();
    if let Some(w) = n.weight {
        v.push(1);
        v.extend_from_slice(&w.to_le_bytes());
    }
    if let Some(e) = n.eps {
        v.push(3);
        v.extend_from_slice(&e.to_bits().to_le_bytes());
    }
    if let Some(a) = n.axis {
        v.push(2);
        v.extend_from_slice(&a.to_le_bytes());
    }
    if n.transpose_b {
        v.push(1);
        v.extend_from_slice(&1u64.to_le_bytes());
    }
    v
}

/// What a runtime does without the builder: an adapter per call.
#[inline(never)]
fn key_with_adapter(nodes: &[RtNode]) -> Key {
    let attrs: Vec<Vec<u8>> = nodes.iter().map(attr_bytes).collect();
    let types: Vec<[TensorType<'_>; 1]> = nodes.iter().map(|n| [TensorType { dtype: n.dtype, dims: &n.shape }]).collect();
    let refs: Vec<Vec<Ref>> = nodes.iter().map(|n| n.inputs.iter().map(|&i| Ref { node: i as u32, slot: 0 }).collect()).collect();
    let cn: Vec<Node<'_>> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Node {
            op: Op::Name(n.op.name()),
            attrs: &attrs[i],
            outputs: &types[i],
            operands: &refs[i],
            constant: None,
            param: n.param.map(u64::from),
        })
        .collect();
    graph_key(&cn, &[Ref { node: nodes.len() as u32 - 1, slot: 0 }], "cpu").expect("adapter key")
}

#[inline(never)]
fn key_prebuilt(cn: &[Node<'_>], out: &[Ref]) -> Key {
    graph_key(cn, out, "cpu").expect("prebuilt key")
}

/// The C nodes of `cn`, made once: the hash alone, no Rust around it.
struct RawNodes {
    nodes: Vec<ffi::ccache_fp_node>,
    _names: Vec<CString>,
    _tensors: Vec<ffi::ccache_fp_tensor>,
}

fn raw_nodes(cn: &[Node<'_>]) -> RawNodes {
    let names: Vec<CString> = cn
        .iter()
        .map(|n| CString::new(if let Op::Name(s) = n.op { s } else { "" }).unwrap())
        .collect();
    let tensors: Vec<ffi::ccache_fp_tensor> = cn
        .iter()
        .map(|n| ffi::ccache_fp_tensor { dtype: n.outputs[0].dtype, rank: n.outputs[0].dims.len() as u32, dims: n.outputs[0].dims.as_ptr() })
        .collect();
    let nodes = cn
        .iter()
        .enumerate()
        .map(|(i, n)| ffi::ccache_fp_node {
            op_name: names[i].as_ptr(),
            op_id: 0,
            attrs: n.attrs.as_ptr().cast(),
            attrs_len: n.attrs.len(),
            outputs: &tensors[i],
            n_outputs: 1,
            n_operands: n.operands.len() as u32,
            operands: n.operands.as_ptr().cast(),
            constant: std::ptr::null(),
            constant_len: 0,
            param_index: n.param.map_or(-1, |p| p as i64),
        })
        .collect();
    RawNodes { nodes, _names: names, _tensors: tensors }
}

#[inline(never)]
fn key_hash_alone(raw: &RawNodes, out: &[Ref], scratch: &mut [ffi::ccache_key]) -> Key {
    let mut key = ffi::ccache_key::default();
    // SAFETY: the nodes point into data alive for the whole run; scratch holds n keys.
    let rc = unsafe {
        ffi::ccache_fp_graph(
            raw.nodes.as_ptr(),
            raw.nodes.len(),
            out.as_ptr().cast(),
            out.len(),
            b"cpu\0".as_ptr().cast(),
            scratch.as_mut_ptr(),
            &mut key,
        )
    };
    assert_eq!(rc, 0);
    key.into()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn spread(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)))
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let nodes = decoder_layer();
    // The prebuilt baseline, made once.
    let attrs: Vec<Vec<u8>> = nodes.iter().map(attr_bytes).collect();
    let types: Vec<[TensorType<'_>; 1]> = nodes.iter().map(|n| [TensorType { dtype: n.dtype, dims: &n.shape }]).collect();
    let refs: Vec<Vec<Ref>> = nodes.iter().map(|n| n.inputs.iter().map(|&i| Ref { node: i as u32, slot: 0 }).collect()).collect();
    let prebuilt: Vec<Node<'_>> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Node {
            op: Op::Name(n.op.name()),
            attrs: &attrs[i],
            outputs: &types[i],
            operands: &refs[i],
            constant: None,
            param: n.param.map(u64::from),
        })
        .collect();
    let out = [Ref { node: nodes.len() as u32 - 1, slot: 0 }];

    let mut g = GraphKeyBuilder::new();
    let raw = raw_nodes(&prebuilt);
    let mut scratch = vec![ffi::ccache_key::default(); raw.nodes.len()];
    let want = key_prebuilt(&prebuilt, &out);
    assert_eq!(key_hash_alone(&raw, &out, &mut scratch), want);
    let (b, a) = (key_with_builder(&mut g, &nodes), key_with_adapter(&nodes));
    if b != want || a != want {
        eprintln!("graph_bench: keys differ: builder {b:?}, adapter {a:?}, graph_key {want:?}");
        std::process::exit(1);
    }

    let (reps, n) = if quick { (3, 2_000) } else { (15, 40_000) };
    let time = |f: &mut dyn FnMut() -> u64| {
        let t = Instant::now();
        let mut s = 0u64;
        for _ in 0..n {
            s ^= f();
        }
        black_box(s);
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let (mut tb, mut tp, mut ta, mut rb, mut ra) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut th, mut rh) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let p = time(&mut || key_prebuilt(black_box(&prebuilt), &out).lo);
        let bb = time(&mut || key_with_builder(&mut g, black_box(&nodes)).lo);
        let aa = time(&mut || key_with_adapter(black_box(&nodes)).lo);
        let hh = time(&mut || key_hash_alone(black_box(&raw), &out, &mut scratch).lo);
        th.push(hh);
        rh.push(bb / hh);
        tp.push(p);
        tb.push(bb);
        ta.push(aa);
        rb.push(bb / p);
        ra.push(aa / p);
    }
    let ((bl, bh), (al, ah), (hl, hx)) = (spread(&rb), spread(&ra), spread(&rh));
    let (mh, xh) = (median(&mut th), median(&mut rh));
    let (mp, mb, ma, xb, xa) = (median(&mut tp), median(&mut tb), median(&mut ta), median(&mut rb), median(&mut ra));
    let note = if quick { "; --quick" } else { "" };
    println!("### rust_graph: a runtime's own 22-node decoder graph, keyed through GraphKeyBuilder vs graph_key on prebuilt nodes\n");
    println!("| figure | measured (median) | baseline (median) | ratio: median [min, max] (reps) | target | status | notes |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| `GraphKeyBuilder` from the runtime's node structs vs `graph_key` on prebuilt `Node`s, 22 nodes, ns per graph | {mb:.0} ns | {mp:.0} ns | {xb:.2}× [{bl:.2}, {bh:.2}] ({reps}) | ≤ 1.2× | {} | {n} graphs per rep; same key both ways; bindings/rust/examples/graph_bench.rs{note} |",
        if xb <= 1.2 { "met" } else { "MISSED" }
    );
    println!(
        "| `GraphKeyBuilder` from the runtime's node structs vs `ccache_fp_graph` on C nodes made once (the hash alone), 22 nodes, ns per graph | {mb:.0} ns | {mh:.0} ns | {xh:.2}× [{hl:.2}, {hx:.2}] ({reps}) | report | report | what the builder adds to the hash{note} |"
    );
    println!(
        "| adapter (per call: attribute bytes, `TensorType`/`Ref`/`Node` vectors, then `graph_key`) vs `graph_key` on prebuilt `Node`s, 22 nodes, ns per graph | {ma:.0} ns | {mp:.0} ns | {xa:.2}× [{al:.2}, {ah:.2}] ({reps}) | report | report | what the builder replaces{note} |"
    );
}

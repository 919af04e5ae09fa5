//! An RLX-style runtime in miniature, served from 4 threads, two ways:
//!
//! - RLX's pattern: a `thread_local!` `HashMap<u64, Rc<RefCell<CompiledGraph>>>`
//!   keyed by `DefaultHasher` over `Debug` text.  Every thread compiles every
//!   graph, and the compiled graph carries its workspace, so it cannot be shared.
//! - ccache: `CompiledGraph` split into an immutable `Plan` (the program,
//!   shared through one `Cache` by every thread: `Send + Sync`) and a
//!   per-thread `Workspace` passed in with each run.  Each graph compiles once.
//!
//! Keys come from `ccache::graph_key` (structure, constants, shapes, device).
//! Both ways must give bit-identical answers; the exit status is 1 if they do
//! not, or if either compile count is not what its pattern implies.
//!
//! Run: `cargo run --offline --example rlx_runtime` (`-- --threads N --requests N`).

use ccache::{graph_key, Cache, Config, Key, Node, Op, Ref, Status, TensorType};
use std::cell::RefCell;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

// ---- the graph type ------------------------------------------------------

#[derive(Clone, Debug)]
enum OpKind {
    Input(u32),
    Const(f32),
    Add,
    Mul,
    Relu,
    Scale(f32),
}

#[derive(Clone, Debug)]
struct GNode {
    op: OpKind,
    inputs: Vec<usize>,
}

/// A graph over f32 vectors of one length; nodes in topological order.
#[derive(Clone, Debug)]
struct Graph {
    nodes: Vec<GNode>,
    output: usize,
    len: usize,
}

impl Graph {
    fn n_inputs(&self) -> usize {
        self.nodes.iter().filter(|n| matches!(n.op, OpKind::Input(_))).count()
    }
}

/// Six small graphs: MLP-ish layers with different constants and depths.
fn graphs(len: usize) -> Vec<Graph> {
    (0..6)
        .map(|g| {
            let mut nodes = vec![GNode { op: OpKind::Input(0), inputs: vec![] }, GNode { op: OpKind::Input(1), inputs: vec![] }];
            let mut last = 0;
            for layer in 0..(2 + g % 3) {
                let w = nodes.len();
                nodes.push(GNode { op: OpKind::Const(0.5 + 0.25 * (g + layer) as f32), inputs: vec![] });
                nodes.push(GNode { op: OpKind::Mul, inputs: vec![last, w] });
                nodes.push(GNode { op: OpKind::Add, inputs: vec![nodes.len() - 1, 1] });
                nodes.push(GNode { op: OpKind::Relu, inputs: vec![nodes.len() - 1] });
                last = nodes.len() - 1;
            }
            nodes.push(GNode { op: OpKind::Scale(1.0 / (g + 1) as f32), inputs: vec![last] });
            Graph { output: nodes.len() - 1, nodes, len }
        })
        .collect()
}

// ---- compiling: graph -> immutable plan ----------------------------------

#[derive(Clone, Debug)]
enum Step {
    Load { input: u32, dst: usize },
    Fill { value: f32, dst: usize },
    Add { a: usize, b: usize, dst: usize },
    Mul { a: usize, b: usize, dst: usize },
    Relu { a: usize, dst: usize },
    Scale { a: usize, k: f32, dst: usize },
}

/// The compiled program: immutable once made, so any number of threads may
/// run it at once (ccache.h's sharing contract).  No workspace inside.
#[derive(Debug)]
struct Plan {
    steps: Vec<Step>,
    slots: usize,
    out: usize,
    len: usize,
}

/// Per-thread mutable state: what RLX's `RefCell<CompiledGraph>` kept inside.
#[derive(Default)]
struct Workspace {
    buf: Vec<f32>,
}

fn compile(g: &Graph) -> Plan {
    // Slot allocation: one slot per node, reused when its last consumer ran
    // (a stand-in for RLX's memory planning).
    let mut last_use = vec![0usize; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for &a in &n.inputs {
            last_use[a] = i;
        }
    }
    last_use[g.output] = usize::MAX;
    let mut free: Vec<usize> = Vec::new();
    let mut slot_of = vec![0usize; g.nodes.len()];
    let mut slots = 0;
    let mut steps = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let dst = free.pop().unwrap_or_else(|| {
            slots += 1;
            slots - 1
        });
        slot_of[i] = dst;
        let s = |k: usize| slot_of[n.inputs[k]];
        steps.push(match n.op {
            OpKind::Input(input) => Step::Load { input, dst },
            OpKind::Const(value) => Step::Fill { value, dst },
            OpKind::Add => Step::Add { a: s(0), b: s(1), dst },
            OpKind::Mul => Step::Mul { a: s(0), b: s(1), dst },
            OpKind::Relu => Step::Relu { a: s(0), dst },
            OpKind::Scale(k) => Step::Scale { a: s(0), k, dst },
        });
        for &a in &n.inputs {
            if last_use[a] == i && !free.contains(&slot_of[a]) {
                free.push(slot_of[a]);
            }
        }
    }
    Plan { steps, slots, out: slot_of[g.output], len: g.len }
}

fn run(p: &Plan, inputs: &[Vec<f32>], ws: &mut Workspace) -> Vec<f32> {
    let n = p.len;
    if ws.buf.len() < p.slots * n {
        ws.buf.resize(p.slots * n, 0.0);
    }
    let b = &mut ws.buf;
    for st in &p.steps {
        match *st {
            Step::Load { input, dst } => b[dst * n..(dst + 1) * n].copy_from_slice(&inputs[input as usize]),
            Step::Fill { value, dst } => b[dst * n..(dst + 1) * n].iter_mut().for_each(|x| *x = value),
            Step::Add { a, b: c, dst } => (0..n).for_each(|i| b[dst * n + i] = b[a * n + i] + b[c * n + i]),
            Step::Mul { a, b: c, dst } => (0..n).for_each(|i| b[dst * n + i] = b[a * n + i] * b[c * n + i]),
            Step::Relu { a, dst } => (0..n).for_each(|i| b[dst * n + i] = b[a * n + i].max(0.0)),
            Step::Scale { a, k, dst } => (0..n).for_each(|i| b[dst * n + i] = b[a * n + i] * k),
        }
    }
    b[p.out * n..(p.out + 1) * n].to_vec()
}

// ---- keys ----------------------------------------------------------------

/// The structural key: ops, constants (as attribute bytes), operands,
/// shapes, graph inputs and the device.  Same in every process.
fn structural_key(g: &Graph, device: &str) -> Result<Key, Status> {
    let dims = [g.len as i64];
    let t = [TensorType { dtype: 1, dims: &dims }];
    let attrs: Vec<[u8; 4]> = g
        .nodes
        .iter()
        .map(|n| match n.op {
            OpKind::Const(v) | OpKind::Scale(v) => v.to_bits().to_le_bytes(),
            _ => [0; 4],
        })
        .collect();
    let refs: Vec<Vec<Ref>> = g.nodes.iter().map(|n| n.inputs.iter().map(|&i| Ref { node: i as u32, slot: 0 }).collect()).collect();
    let nodes: Vec<Node<'_>> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Node {
            op: Op::Name(match n.op {
                OpKind::Input(_) => "input",
                OpKind::Const(_) => "const",
                OpKind::Add => "add",
                OpKind::Mul => "mul",
                OpKind::Relu => "relu",
                OpKind::Scale(_) => "scale",
            }),
            attrs: &attrs[i],
            outputs: &t,
            operands: &refs[i],
            constant: None,
            param: match n.op {
                OpKind::Input(k) => Some(k as u64),
                _ => None,
            },
        })
        .collect();
    graph_key(&nodes, &[Ref { node: g.output as u32, slot: 0 }], device)
}

/// RLX's key: DefaultHasher over Debug text (fine inside one process only).
fn rlx_key(g: &Graph) -> u64 {
    let mut h = DefaultHasher::new();
    format!("{g:?}").hash(&mut h);
    h.finish()
}

// ---- the two serving paths -----------------------------------------------

/// RLX's CompiledGraph: program and workspace in one `RefCell`.
struct CompiledGraph {
    plan: Plan,
    ws: Workspace,
}

static TL_COMPILES: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static TL_CACHE: RefCell<HashMap<u64, Rc<RefCell<CompiledGraph>>>> = RefCell::new(HashMap::new());
}

fn serve_thread_local(g: &Graph, inputs: &[Vec<f32>]) -> Vec<f32> {
    let key = rlx_key(g);
    let compiled = TL_CACHE.with(|c| {
        c.borrow_mut()
            .entry(key)
            .or_insert_with(|| {
                TL_COMPILES.fetch_add(1, Ordering::SeqCst);
                Rc::new(RefCell::new(CompiledGraph { plan: compile(g), ws: Workspace::default() }))
            })
            .clone()
    });
    let mut cg = compiled.borrow_mut();
    let CompiledGraph { plan, ws } = &mut *cg;
    run(plan, inputs, ws)
}

/// The closure: what one call site needs besides the program (here, the
/// number of inputs it checks).  Immutable too.
struct Site {
    n_inputs: usize,
}

static CC_COMPILES: AtomicUsize = AtomicUsize::new(0);

fn serve_ccache(cache: &Cache<Site, Plan>, g: &Graph, key: Key, inputs: &[Vec<f32>], ws: &mut Workspace) -> Vec<f32> {
    let lease = cache
        .get_or_compile(key, |c| {
            let program = c.program_get_or_compile(key, |_| {
                CC_COMPILES.fetch_add(1, Ordering::SeqCst);
                let plan = compile(g);
                let bytes = (plan.steps.len() * std::mem::size_of::<Step>()) as u64;
                Ok::<_, Status>((plan, bytes))
            })?;
            Ok::<_, ccache::CompileError<Status>>((Site { n_inputs: g.n_inputs() }, program))
        })
        .expect("get_or_compile");
    assert_eq!(lease.closure().n_inputs, inputs.len());
    run(lease.program(), inputs, ws)
}

fn main() {
    let mut threads = 4usize;
    let mut requests = 60usize;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).and_then(|s| s.parse().ok());
        match (args[i].as_str(), v) {
            ("--threads", Some(n)) if n > 0 => threads = n,
            ("--requests", Some(n)) if n > 0 => requests = n,
            _ => {
                eprintln!("usage: rlx_runtime [--threads N] [--requests N]");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    let len = 64;
    let gs = graphs(len);
    let keys: Vec<Key> = gs.iter().map(|g| structural_key(g, "cpu").expect("graph_key")).collect();
    let cache: Cache<Site, Plan> = Cache::open(Config { max_items: Some(4096), ..Config::default() }).expect("open");

    // Each thread serves the same request stream both ways; request r uses
    // graph r % 6 with inputs that depend on (thread, r).
    let results: Vec<(usize, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (gs, keys, cache) = (&gs, &keys, &cache);
                s.spawn(move || {
                    let mut ws = Workspace::default();
                    let mut agree = 0;
                    for r in 0..requests {
                        let gi = r % gs.len();
                        let inputs: Vec<Vec<f32>> = (0..2)
                            .map(|k| (0..len).map(|j| ((t * 31 + r * 7 + j + k * 13) % 17) as f32 - 8.0).collect())
                            .collect();
                        let a = serve_ccache(cache, &gs[gi], keys[gi], &inputs, &mut ws);
                        let b = serve_thread_local(&gs[gi], &inputs);
                        if a.iter().map(|x| x.to_bits()).eq(b.iter().map(|x| x.to_bits())) {
                            agree += 1;
                        }
                    }
                    (agree, requests)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let agree: usize = results.iter().map(|r| r.0).sum();
    let total: usize = results.iter().map(|r| r.1).sum();
    let cc = CC_COMPILES.load(Ordering::SeqCst);
    let tl = TL_COMPILES.load(Ordering::SeqCst);
    let st = cache.stats();
    let used = gs.len().min(requests);
    println!("rlx_runtime: {threads} threads x {requests} requests over {used} graphs");
    println!("  ccache, one shared cache:       {cc:3} compiles (once per graph; hits {}, waits {})", st.hits, st.waits);
    println!("  thread_local HashMap (RLX):     {tl:3} compiles (once per graph per thread)");
    println!("  answers agree: {agree} of {total}");
    let mut ok = true;
    if cc != used {
        eprintln!("rlx_runtime: FAIL: ccache compiled {cc} times, want {used}");
        ok = false;
    }
    if tl != used * threads {
        eprintln!("rlx_runtime: FAIL: the thread-local pattern compiled {tl} times, want {}", used * threads);
        ok = false;
    }
    if agree != total {
        eprintln!("rlx_runtime: FAIL: {} answers differ", total - agree);
        ok = false;
    }
    if !ok {
        std::process::exit(1);
    }
}

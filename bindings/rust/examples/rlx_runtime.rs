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
//! Then the fleet: signed tiers.  Plans go to a directory tier through a
//! `Codec`, signed by a build-farm writer (a signing key); a serving process
//! that trusts only the farm's public key loads them without compiling, and
//! an unsigned plan a keyless process planted first is rejected, never run.
//!
//! Run: `cargo run --offline --example rlx_runtime` (`-- --threads N --requests N`).

use ccache::{graph_key, Cache, Codec, Config, DiskOptions, Key, Node, Op, Ref, Status, TensorType, Tier, Trust};
use std::path::Path;
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
    if let Err(why) = signed_tiers(&gs, &keys) {
        eprintln!("rlx_runtime: FAIL: {why}");
        ok = false;
    }
    if !ok {
        std::process::exit(1);
    }
}

// ---- the fleet: plans in a signed directory tier -------------------------

/// Plans as bytes: per step a tag byte and its fields (u32 slots, f32 bits,
/// little-endian); decode checks every length and slot.
struct PlanCodec;

impl Codec<Plan> for PlanCodec {
    fn encode(&self, _: Key, p: &Plan) -> Option<Vec<u8>> {
        let mut v = Vec::new();
        for x in [p.slots, p.out, p.len] {
            v.extend_from_slice(&(x as u32).to_le_bytes());
        }
        for st in &p.steps {
            let (tag, f): (u8, [u32; 3]) = match *st {
                Step::Load { input, dst } => (0, [input, dst as u32, 0]),
                Step::Fill { value, dst } => (1, [value.to_bits(), dst as u32, 0]),
                Step::Add { a, b, dst } => (2, [a as u32, b as u32, dst as u32]),
                Step::Mul { a, b, dst } => (3, [a as u32, b as u32, dst as u32]),
                Step::Relu { a, dst } => (4, [a as u32, dst as u32, 0]),
                Step::Scale { a, k, dst } => (5, [a as u32, k.to_bits(), dst as u32]),
            };
            v.push(tag);
            f.iter().for_each(|x| v.extend_from_slice(&x.to_le_bytes()));
        }
        Some(v)
    }
    fn decode(&self, _: Key, b: &[u8]) -> Option<(Plan, u64)> {
        let word = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
        let (slots, out, len) = (word(0)? as usize, word(4)? as usize, word(8)? as usize);
        if (b.len() - 12) % 13 != 0 || out >= slots || len == 0 || len > 1 << 20 || slots > 1 << 10 {
            return None;
        }
        let mut steps = Vec::new();
        for at in (12..b.len()).step_by(13) {
            let f = |k: usize| word(at + 1 + 4 * k);
            let s = |k: usize| f(k).map(|x| x as usize).filter(|&x| x < slots);
            steps.push(match b[at] {
                0 => Step::Load { input: f(0)?.min(1), dst: s(1)? },
                1 => Step::Fill { value: f32::from_bits(f(0)?), dst: s(1)? },
                2 => Step::Add { a: s(0)?, b: s(1)?, dst: s(2)? },
                3 => Step::Mul { a: s(0)?, b: s(1)?, dst: s(2)? },
                4 => Step::Relu { a: s(0)?, dst: s(1)? },
                5 => Step::Scale { a: s(0)?, k: f32::from_bits(f(1)?), dst: s(2)? },
                _ => return None,
            });
        }
        let cost = b.len() as u64;
        Some((Plan { steps, slots, out, len }, cost))
    }
}

/// One process of the fleet: a cache over the shared directory tier, every
/// graph's plan fetched or compiled; returns the stats and the answers.
fn fleet_process(dir: &Path, trust: Option<Trust>, gs: &[Graph], keys: &[Key], evil: bool) -> Result<(ccache::Stats, usize), Status> {
    let tier = Tier::disk(&DiskOptions::new(dir.join("plans")))?;
    let config = Config {
        runtime_tag: Some("rlx-mini 1; f32".into()),
        tier_min_compile: std::time::Duration::ZERO,
        tiers: vec![tier],
        trust,
        ..Config::default()
    };
    let cache: Cache<(), Plan> = Cache::open_with_codec(config, PlanCodec)?;
    let inputs: Vec<Vec<f32>> = (0..2).map(|k| (0..gs[0].len).map(|j| ((j + k * 5) % 11) as f32 - 5.0).collect()).collect();
    let mut agree = 0;
    let n = if evil { 1 } else { gs.len() };
    for (g, &key) in gs.iter().zip(keys).take(n) {
        let plan = cache
            .program_get_or_compile(key, |_| {
                let mut plan = compile(g);
                if evil {
                    // What the planted entry does: the right shape, a wrong answer.
                    plan.steps.push(Step::Scale { a: plan.out, k: -1000.0, dst: plan.out });
                }
                Ok::<_, Status>((plan, 64))
            })
            .map_err(|e| match e {
                ccache::CompileError::Cache(s) | ccache::CompileError::Compile(s) => s,
            })?;
        let a = run(&plan, &inputs, &mut Workspace::default());
        let b = run(&compile(g), &inputs, &mut Workspace::default());
        if a.iter().map(|x| x.to_bits()).eq(b.iter().map(|x| x.to_bits())) {
            agree += 1;
        }
    }
    Ok((cache.stats(), agree))
}

fn signed_tiers(gs: &[Graph], keys: &[Key]) -> Result<(), String> {
    if !Trust::available() {
        println!("  signed tiers: skipped (libccache built without libsodium)");
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("rlx-runtime-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let r = signed_tiers_in(&dir, gs, keys);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn signed_tiers_in(dir: &Path, gs: &[Graph], keys: &[Key]) -> Result<(), String> {
    let e = |s: Status| s.to_string();
    let (secret, public) = (dir.join("farm.secret"), dir.join("farm.pub"));
    Trust::generate("rlx-farm", &secret, &public).map_err(e)?;
    // A keyless process on the same tier plants a plan for graph 0.
    let (planted, _) = fleet_process(dir, None, gs, keys, true).map_err(e)?;
    let mut farm = Trust::new().map_err(e)?;
    farm.signing_key_file(&secret).map_err(e)?;
    let (w, w_ok) = fleet_process(dir, Some(farm), gs, keys, false).map_err(e)?;
    let mut serving = Trust::new().map_err(e)?;
    serving.trusted_key_file(&public).map_err(e)?;
    let (r, r_ok) = fleet_process(dir, Some(serving), gs, keys, false).map_err(e)?;
    let n = gs.len();
    println!("  signed directory tier (key rlx-farm), {n} graphs; a keyless process planted {} unsigned plan:", planted.tier_writes);
    println!(
        "    build farm (signing key):  {} compiles, {} signed writes, {} lookups rejected the planted plan; answers agree: {w_ok} of {n}",
        w.program_compiles, w.tier_writes, w.tier_rejected
    );
    println!(
        "    serving (trusted key):     {} compiles, {} tier hits, {} rejected; answers agree: {r_ok} of {n}",
        r.program_compiles, r.tier_hits, r.tier_rejected
    );
    let n = n as u64;
    let want = (planted.tier_writes, w.program_compiles, w.tier_writes, w.tier_rejected >= 1, r.program_compiles, r.tier_hits, r.tier_rejected);
    if want != (1, n, n, true, 0, n, 0) || w_ok as u64 != n || r_ok as u64 != n {
        return Err(format!("signed tiers: unexpected counts {want:?}, answers {w_ok}/{r_ok}"));
    }
    Ok(())
}

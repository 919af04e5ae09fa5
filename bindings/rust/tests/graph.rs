//! The streaming graph-key builder (issue 39, item 3): the key is
//! graph_key's for the same nodes, a warm builder allocates nothing, and a
//! bad node fails the finish.

use ccache::{graph_key, GraphKeyBuilder, Node, Op, Ref, Status, TensorType};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts the allocations of the thread that turned counting on.
struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCS.fetch_add(1, Ordering::SeqCst);
        }
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCS.fetch_add(1, Ordering::SeqCst);
        }
        System.realloc(p, l, n)
    }
}
#[global_allocator]
static A: Counting = Counting;

const D: [i64; 2] = [128, 576];
const T: [TensorType<'static>; 1] = [TensorType { dtype: 1, dims: &D }];

/// x (param 0), w (constant), matmul(x, w) by name with attribute bytes,
/// relu by id, add(matmul, relu): the same graph both ways.
fn nodes() -> Vec<Node<'static>> {
    let r = |node| Ref { node, slot: 0 };
    let ops: &'static [Ref] = Box::leak(vec![r(0), r(1)].into_boxed_slice());
    let relu_in: &'static [Ref] = Box::leak(vec![r(2)].into_boxed_slice());
    let add_in: &'static [Ref] = Box::leak(vec![r(2), r(3)].into_boxed_slice());
    vec![
        Node { op: Op::Name("param"), attrs: &[], outputs: &T, operands: &[], constant: None, param: Some(0) },
        Node { op: Op::Name("const"), attrs: &[], outputs: &T, operands: &[], constant: Some(&[1, 2, 3]), param: None },
        Node { op: Op::Name("matmul"), attrs: b"transpose_b", outputs: &T, operands: ops, constant: None, param: None },
        Node { op: Op::Id(17), attrs: &[], outputs: &T, operands: relu_in, constant: None, param: None },
        Node { op: Op::Name("add"), attrs: &[], outputs: &T, operands: add_in, constant: None, param: None },
    ]
}

fn through_builder(g: &mut GraphKeyBuilder, nodes: &[Node<'_>], device: &str) -> Result<ccache::Key, Status> {
    for n in nodes {
        g.node(n.op, n.attrs, n.operands, n.outputs);
        if let Some(c) = n.constant {
            g.set_constant(c);
        }
        if let Some(p) = n.param {
            g.set_param(p as u32);
        }
    }
    g.finish(&[Ref { node: 4, slot: 0 }], device)
}

#[test]
fn the_builder_gives_graph_keys_key() {
    let nodes = nodes();
    let want = graph_key(&nodes, &[Ref { node: 4, slot: 0 }], "cpu").unwrap();
    let mut g = GraphKeyBuilder::new();
    assert_eq!(through_builder(&mut g, &nodes, "cpu").unwrap(), want);
    // Reused after a finish: the same key again; another device another key.
    assert_eq!(through_builder(&mut g, &nodes, "cpu").unwrap(), want);
    assert_ne!(through_builder(&mut g, &nodes, "gpu").unwrap(), want);
}

#[test]
fn a_warm_builder_allocates_nothing() {
    let nodes = nodes();
    let mut g = GraphKeyBuilder::new();
    let want = through_builder(&mut g, &nodes, "cpu").unwrap(); // warms the arenas
    let mut keys = Vec::with_capacity(100);
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.with(|c| c.set(true));
    for _ in 0..100 {
        keys.push(through_builder(&mut g, &nodes, "cpu").unwrap());
    }
    COUNTING.with(|c| c.set(false));
    assert_eq!(ALLOCS.load(Ordering::SeqCst), 0, "allocations in 100 warm graphs of {} nodes", nodes.len());
    assert!(keys.iter().all(|k| *k == want));
    // graph_key on the same nodes allocates on every call (the adapter the builder replaces).
    COUNTING.with(|c| c.set(true));
    graph_key(&nodes, &[Ref { node: 4, slot: 0 }], "cpu").unwrap();
    COUNTING.with(|c| c.set(false));
    assert!(ALLOCS.load(Ordering::SeqCst) > nodes.len());
}

#[test]
fn framed_attributes_differ_by_type_and_boundary() {
    let key = |f: &dyn Fn(&mut GraphKeyBuilder)| {
        let mut g = GraphKeyBuilder::new();
        g.begin(Op::Name("op"));
        f(&mut g);
        g.output(1, &[4]);
        g.finish(&[Ref { node: 0, slot: 0 }], "cpu").unwrap()
    };
    let u = key(&|g| {
        g.attr_u64(1);
    });
    let i = key(&|g| {
        g.attr_i64(1);
    });
    let ab_c = key(&|g| {
        g.attr_str("ab").attr_str("c");
    });
    let a_bc = key(&|g| {
        g.attr_str("a").attr_str("bc");
    });
    let bytes = key(&|g| {
        g.attr_bytes(b"ab").attr_str("c");
    });
    assert_ne!(u, i);
    assert_ne!(ab_c, a_bc);
    assert_ne!(ab_c, bytes);
}

#[test]
fn a_bad_node_fails_the_finish_and_the_builder_recovers() {
    let mut g = GraphKeyBuilder::new();
    g.node(Op::Name("nul\0name"), &[], &[], &T);
    assert_eq!(g.finish(&[Ref { node: 0, slot: 0 }], "cpu").unwrap_err().code(), Status::EINVAL);
    g.node(Op::Name("x"), &[], &[], &[TensorType { dtype: 1, dims: &[1; 17] }]);
    assert_eq!(g.finish(&[Ref { node: 0, slot: 0 }], "cpu").unwrap_err().code(), Status::EINVAL);
    g.node(Op::Name("x"), &[], &[Ref { node: 1, slot: 0 }], &T); // forward reference
    assert_eq!(g.finish(&[Ref { node: 0, slot: 0 }], "cpu").unwrap_err().code(), Status::EINVAL);
    g.node(Op::Name("x"), &[], &[], &T);
    g.set_param(0).set_param(1);
    assert_eq!(g.finish(&[Ref { node: 0, slot: 0 }], "cpu").unwrap_err().code(), Status::EINVAL);
    assert!(g.is_empty());
    let nodes = nodes();
    assert_eq!(through_builder(&mut g, &nodes, "cpu").unwrap(), graph_key(&nodes, &[Ref { node: 4, slot: 0 }], "cpu").unwrap());
}

use harness::*;
#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let topo = topology::Topology::parse_spec(&args[2]).unwrap();
    let qemu = host::find_qemu().unwrap();
    let bins = guestbin::GuestBins::locate_or_build().unwrap();
    let mut tests = if args.len() > 4 {
        vec![suite::topology_check(&topo)]
    } else {
        vec![]
    };
    tests.extend(suite::builtin(&args[3], None).unwrap());
    let spec = cell::CellSpec {
        name: "x".into(),
        kernel_label: "k".into(),
        kernel_image: args[1].clone().into(),
        topology_label: args[2].clone(),
        topology: topo,
        suite_label: "s".into(),
        tests,
        accel: qemu::Accel::Tcg,
        cmdline_extra: vec![],
        watchdog: None,
        timeout_scale: 1.0,
        out_dir: "/tmp/bootout".into(),
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let t = std::time::Instant::now();
    let c = cell::run(&spec, &qemu, &bins, &cancel).await.unwrap();
    println!("end={:?} dur={:?}", c.end, t.elapsed());
}

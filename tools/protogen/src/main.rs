//! `etcdlock-protogen ROOT OUT`: generate the Rust code of etcd's protos,
//! as `vendor/etcd-client` (client stubs, the crate's own build script's
//! settings) and `memetcd` (server stubs) commit it, from the `.proto` files
//! under ROOT into OUT/etcd-client and OUT/memetcd. Needs `protoc`; building
//! etcdlock does not. `scripts/protos.sh` runs it and compares or installs.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: etcdlock-protogen ROOT OUT");
        std::process::exit(2);
    }
    let (root, out) = (
        std::path::Path::new(&args[1]),
        std::path::Path::new(&args[2]),
    );
    let client = out.join("etcd-client");
    let server = out.join("memetcd");
    for d in [&client, &server] {
        std::fs::create_dir_all(d).expect("create the output folder");
    }
    // vendor/etcd-client/build.rs of etcd-client 0.21.1, without the
    // build-server feature (etcdlock never enables it).
    let proto = root.join("vendor/etcd-client/proto");
    let files = [
        "etcd/api/authpb/auth.proto",
        "etcd/api/etcdserverpb/rpc.proto",
        "etcd/api/mvccpb/kv.proto",
        "etcd/server/etcdserver/api/v3election/v3electionpb/v3election.proto",
        "etcd/server/etcdserver/api/v3lock/v3lockpb/v3lock.proto",
    ]
    .map(|f| proto.join(f));
    tonic_prost_build::configure()
        .build_server(false)
        .out_dir(&client)
        .compile_protos(&files, std::slice::from_ref(&proto))
        .expect("compile etcd-client's protos");
    // memetcd/build.rs as it was.
    let mproto = root.join("memetcd/proto");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .out_dir(&server)
        .compile_protos(
            &[mproto.join("etcd/api/etcdserverpb/rpc.proto")],
            std::slice::from_ref(&mproto),
        )
        .expect("compile memetcd's protos");
}

fn main() {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_protos(&["proto/etcd/api/etcdserverpb/rpc.proto"], &["proto"])
        .expect("compile etcd's protos");
}

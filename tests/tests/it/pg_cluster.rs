//! The throw-away PostgreSQL cluster that the archive and search tests run against.

use cairn_tests::pg::Cluster;

#[test]
fn a_cluster_starts_serves_and_stops() {
    let cluster = Cluster::start();
    let port = cluster.port();
    std::net::TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("connect to the cluster: {e}\n{}", cluster.server_log()));
    let url = cluster.create_db("cairn_test");
    assert_eq!(url, format!("postgres://cairn@127.0.0.1:{port}/cairn_test"));
    drop(cluster);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the server still listens after the cluster was dropped"
    );
}

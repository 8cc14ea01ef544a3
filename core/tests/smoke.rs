use etcdlock::{Client, ClientOptions};
use etcdlock_testkit::Etcd;

#[tokio::test]
async fn smoke() {
    let etcd = Etcd::single();
    let c = Client::connect(ClientOptions::new(etcd.endpoints()).with_ttl(5)).await.unwrap();
    let g = c.lock("a").await.unwrap();
    assert!(g.is_held());
    let c2 = Client::connect(ClientOptions::new(etcd.endpoints()).with_ttl(5)).await.unwrap();
    assert_eq!(c2.try_lock("a").await.unwrap_err().code(), etcdlock::ErrorCode::WouldBlock);
    let t = tokio::spawn({ let c2 = c2.clone(); async move { c2.lock("a").await } });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    g.unlock().await.unwrap();
    let g2 = t.await.unwrap().unwrap();
    assert!(g2.fencing_token() > g.fencing_token());
    println!("{} {}", g.key(), g2.key());
}

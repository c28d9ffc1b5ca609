//! `rediss://` against a real redis-server with a TLS port and a throwaway CA made here
//! (rcgen): a CA the client is given is trusted, any other certificate is refused, and
//! nothing ever falls back to plaintext. Built with `leasehold/tls-rustls` (see
//! `tests/Cargo.toml`); docs/deployment.md shows the same CA set-up.

use std::path::Path;
use std::time::Duration;

use leasehold::fred::prelude::Config;
use leasehold::fred::rustls;
use leasehold::fred::rustls::pki_types::pem::PemObject;
use leasehold::fred::rustls::pki_types::CertificateDer;
use leasehold::fred::types::config::TlsConnector;
use leasehold::Client;
use leasehold_test_support::{raw, wait_until, Monitor, RedisServer, RespValue, ServerOptions, TlsFiles};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};

const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// A throwaway CA and a server certificate it signed, for `localhost` and `127.0.0.1`,
/// written as PEM files into a temp dir that is removed on drop.
struct TestPki {
    dir: std::path::PathBuf,
    files: TlsFiles,
}

impl TestPki {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("leasehold-tls-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, format!("leasehold test CA {name}"));
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key")).expect("CA cert");
        let mut server_params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("server params");
        server_params.distinguished_name.push(DnType::CommonName, "localhost");
        let server_key = KeyPair::generate().expect("server key");
        let server_cert = server_params.signed_by(&server_key, &ca).expect("server cert");
        let write = |file: &str, pem: String| {
            let path = dir.join(file);
            std::fs::write(&path, pem).expect("write PEM");
            path
        };
        let files = TlsFiles {
            cert: write("server.crt", server_cert.pem()),
            key: write("server.key", server_key.serialize_pem()),
            ca: write("ca.crt", ca.pem()),
        };
        TestPki { dir, files }
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What docs/deployment.md tells users to do: a fred config from the `rediss://` URL,
/// whose TLS connector trusts the CA in the PEM file `ca_file` (and nothing else).
fn config_trusting(url: &str, ca_file: &Path) -> Config {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca_file).expect("open CA file") {
        roots.add(cert.expect("parse CA PEM")).expect("add CA");
    }
    let tls = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let mut config = Config::from_url(url).expect("rediss URL");
    config.tls = Some(TlsConnector::from(tls).into());
    config
}

async fn connect(config: Config) -> leasehold::Result<Client> {
    Client::builder().fred_config(config).command_timeout(COMMAND_TIMEOUT).connect().await
}

/// The local ports (`laddr`) of the server's client connections, from `CLIENT LIST`,
/// leaving out the connection asking.
fn client_local_ports(server: &RedisServer) -> Vec<u16> {
    let RespValue::Bulk(list) = raw(server, &["CLIENT", "LIST"]) else { panic!("CLIENT LIST") };
    list.lines()
        .filter(|line| !line.contains("cmd=client|list"))
        .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("laddr=")))
        .filter_map(|addr| addr.rsplit(':').next().and_then(|p| p.parse().ok()))
        .collect()
}

/// The whole error chain as text (leasehold's message, then fred's, then rustls's).
fn chain(err: &leasehold::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(" / ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// With the CA supplied, both connections (commands and pub/sub) are TLS: lock, a
/// second client that waits is woken by the release message, unlock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_with_a_supplied_ca_locks_and_wakes_waiters() {
    let pki = TestPki::new("trusted");
    let server = RedisServer::start_with(ServerOptions::default().tls(pki.files.clone()));
    let tls_port = server.tls_port().expect("TLS port");
    let first = connect(config_trusting(&server.tls_url(), &pki.files.ca)).await.expect("TLS connect");
    let second = connect(config_trusting(&server.tls_url(), &pki.files.ca)).await.expect("TLS connect");

    let guard = first.lock("tls:order").lock().await.expect("lock over TLS");
    // Watchdog mode: a 30 s lease, so the waiter gets the lock in time only if the
    // release message (over the TLS subscriber connection) wakes it.
    let waiter = tokio::spawn(async move {
        let lock = second.lock("tls:order");
        let guard = lock.try_lock_for(Duration::from_secs(10)).await.expect("wait over TLS");
        (second, guard)
    });
    assert!(
        wait_until(Duration::from_secs(5), || raw(
            &server,
            &["PUBSUB", "NUMSUB", "redisson_lock__channel:{tls:order}"]
        ) == RespValue::Array(vec![
            RespValue::Bulk("redisson_lock__channel:{tls:order}".to_owned()),
            RespValue::Integer(1)
        ]))
        .await,
        "the waiter subscribed"
    );
    let ports = client_local_ports(&server);
    assert_eq!(ports.len(), 4, "two clients, a command and a subscriber connection each: {ports:?}");
    assert!(ports.iter().all(|&p| p == tls_port), "every leasehold connection is on the TLS port: {ports:?}");

    let released = tokio::time::Instant::now();
    guard.unlock().await.expect("unlock over TLS");
    let (second, woken) = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken").expect("task");
    assert!(released.elapsed() < Duration::from_secs(5));
    woken.expect("the waiter got the lock").unlock().await.expect("unlock");
    drop((first, second));
}

/// A certificate from a CA the client was not given is refused with an error that names
/// the certificate problem, and nothing is sent in plaintext instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_refused() {
    let pki = TestPki::new("served");
    let other = TestPki::new("other");
    let server = RedisServer::start_with(ServerOptions::default().tls(pki.files.clone()));
    let monitor = Monitor::start(&server.addr());

    let err = connect(config_trusting(&server.tls_url(), &other.files.ca)).await.expect_err("another CA");
    let text = chain(&err);
    eprintln!("another CA: {text}");
    assert!(text.to_lowercase().contains("certificate"), "the error names the certificate: {text}");
    assert!(err.is_connection(), "refused at once as a connection error, not after a timeout: {text}");

    // The URL alone: fred's default roots (the system's) do not include the throwaway CA.
    let err = Client::builder().url(server.tls_url()).command_timeout(COMMAND_TIMEOUT).connect().await;
    let err = err.expect_err("system roots");
    eprintln!("system roots: {}", chain(&err));
    assert!(chain(&err).to_lowercase().contains("certificate"), "{}", chain(&err));

    monitor.sync(&server.addr());
    assert_eq!(monitor.commands(), Vec::<String>::new(), "no command reached the server");
}

/// `rediss://` to a port that speaks plaintext fails: no silent downgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_to_a_plaintext_port_fails() {
    let pki = TestPki::new("plain");
    let server = RedisServer::start();
    let monitor = Monitor::start(&server.addr());
    let url = format!("rediss://127.0.0.1:{}", server.port());
    let err = connect(config_trusting(&url, &pki.files.ca)).await.expect_err("plaintext server");
    eprintln!("plaintext port: {}", chain(&err));
    // The TLS handshake never completes: the connect gives up after its timeout.
    assert!(err.is_timeout() || err.is_connection(), "{}", chain(&err));
    monitor.sync(&server.addr());
    assert_eq!(monitor.commands(), Vec::<String>::new(), "no command ran over plaintext");
}

//! What the integration tests share: private scratch directories and a
//! private redis-server on a unix socket.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A fresh directory, mode 0700, named after the test and this process.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ccache-rs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

/// A running redis-server, killed and its directory removed on drop.
pub struct Redis {
    pub child: Child,
    pub dir: PathBuf,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn find_redis_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CCACHE_TEST_REDIS_SERVER") {
        return Some(PathBuf::from(p));
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("redis-server")).find(|p| p.is_file())
}

/// A private redis-server on a unix socket (no TCP port), or `None` when none
/// is installed (an error instead with CCACHE_TEST_REQUIRE_REDIS=1, as in CI).
pub fn start_redis() -> Option<Redis> {
    let bin = match find_redis_server() {
        Some(b) => b,
        None => {
            assert!(std::env::var("CCACHE_TEST_REQUIRE_REDIS").as_deref() != Ok("1"), "no redis-server");
            eprintln!("redis-server not found: the Redis round trip is skipped (apt-get install redis-server)");
            return None;
        }
    };
    let dir = scratch_dir("redis");
    let sock = dir.join("redis.sock");
    let child = Command::new(bin)
        .args(["--port", "0", "--save", "", "--appendonly", "no", "--unixsocketperm", "700"])
        .arg("--unixsocket")
        .arg(&sock)
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server");
    let r = Redis { child, dir };
    wait_for_socket(&sock);
    Some(r)
}

pub fn wait_for_socket(sock: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(sock).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not come up in 10 s");
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl Redis {
    /// The `servers` option for this server.
    pub fn servers(&self) -> String {
        format!("unix:{}", self.dir.join("redis.sock").display())
    }
}

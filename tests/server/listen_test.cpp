// How g4 serve listens (issue 8): the accept queue holds a burst of connects (cpp-httplib 0.11
// listens with a backlog of 5), and a busy address fails with the OS reason instead of being
// shared through SO_REUSEPORT.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "platform/error.h"
#include "server/http_server.h"

namespace g4::server {
namespace {

constexpr int kBurst = 64;

// Starts kBurst non-blocking connects to 127.0.0.1:port at once and counts those whose
// handshake completes within `wait`. Nobody accepts meanwhile, so a connect completes only
// while the listener's accept queue has room; the rest stay in SYN_SENT (the kernel drops their
// SYN and the client retries after 1 s). Returns the sockets (the caller closes them).
std::vector<int> connect_burst(int port, std::chrono::milliseconds wait, int* completed) {
  std::vector<int> fds;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(uint16_t(port));
  for (int i = 0; i < kBurst; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd, 0);
    if (fd < 0) break;
    const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    EXPECT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
    fds.push_back(fd);
  }
  std::vector<bool> done(fds.size(), false);
  int n = 0;
  const auto until = std::chrono::steady_clock::now() + wait;
  while (n < int(fds.size()) && std::chrono::steady_clock::now() < until) {
    std::vector<pollfd> p;
    std::vector<size_t> idx;
    for (size_t i = 0; i < fds.size(); ++i)
      if (!done[i]) {
        p.push_back({fds[i], POLLOUT, 0});
        idx.push_back(i);
      }
    ::poll(p.data(), p.size(), 20);
    for (size_t k = 0; k < p.size(); ++k) {
      if (!(p[k].revents & (POLLOUT | POLLERR | POLLHUP))) continue;
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(p[k].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      done[idx[k]] = true;
      if (err == 0) ++n;
    }
  }
  *completed = n;
  return fds;
}

void close_all(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

TEST(HttpListen, BurstOfConnectsFitsTheAcceptQueue) {
  httplib::Server svr;  // bound and listening, never accepting: the worst case for the queue
  const int port = bind_and_listen(svr, "127.0.0.1", 0, HttpOptions{}.listen_backlog);
  ASSERT_GT(port, 0);
  int completed = 0;
  const auto fds = connect_burst(port, std::chrono::milliseconds(2000), &completed);
  close_all(fds);
  EXPECT_EQ(completed, kBurst) << "connects that completed while the server was not accepting";
}

TEST(HttpListen, BacklogOfFiveIsWhatTheBurstTestCatches) {
  // The control for the test above: with httplib's own backlog (5) only backlog + 1 connects of
  // the burst complete; the others wait for a SYN retransmission.
  httplib::Server svr;
  const int port = bind_and_listen(svr, "127.0.0.1", 0, 5);
  int completed = 0;
  const auto fds = connect_burst(port, std::chrono::milliseconds(300), &completed);
  close_all(fds);
  EXPECT_LT(completed, kBurst);
  EXPECT_LE(completed, 8);
}

TEST(HttpListen, BusyAddressFailsWithTheOsReason) {
  httplib::Server first;
  const int port = bind_and_listen(first, "127.0.0.1", 0, 16);
  httplib::Server second;
  try {
    bind_and_listen(second, "127.0.0.1", port, 16);
    ADD_FAILURE() << "a second server bound the busy port " << port;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot listen on 127.0.0.1:" + std::to_string(port) + ": "), std::string::npos) << what;
    EXPECT_NE(what.find(std::strerror(EADDRINUSE)), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace g4::server

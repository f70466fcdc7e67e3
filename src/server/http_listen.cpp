#include "server/http_server.h"

#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "platform/error.h"

namespace g4::server {

namespace {

// httplib::Server keeps its listening socket in a protected member; a pointer to member formed
// through a derived class reads it from any httplib::Server.
struct ListeningSocket : httplib::Server {
  static int of(const httplib::Server& s) { return (s.*(&ListeningSocket::svr_sock_)).load(); }
};

void reuse_address_only(socket_t sock) {
  int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

// httplib reports a failed bind as -1/false, not why. Ask the OS: bind a probe socket the way
// httplib does (same getaddrinfo, SO_REUSEADDR, dual-stack for IPv6) and keep its error. When the
// probe binds (the address came free in between) the errno left by httplib's attempt is used.
std::string bind_failure_reason(const std::string& host, int port, int errno_after) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return std::string("cannot resolve the address: ") + ::gai_strerror(rc);
  std::string reason;
  bool bound = false;
  for (addrinfo* a = found; a && !bound; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      if (reason.empty()) reason = std::strerror(errno);
      continue;
    }
    reuse_address_only(fd);
    if (a->ai_family == AF_INET6) {
      int no = 0;
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
    }
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1) != 0) {
      if (reason.empty()) reason = std::strerror(errno);
    } else {
      bound = true;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (bound || reason.empty()) return errno_after != 0 ? std::strerror(errno_after) : "unknown reason (the address is free now)";
  return reason;
}

}  // namespace

int bind_and_listen(httplib::Server& svr, const std::string& host, int port, int backlog) {
  svr.set_socket_options(reuse_address_only);
  errno = 0;
  const int bound = port == 0 ? svr.bind_to_any_port(host) : (svr.bind_to_port(host, port) ? port : -1);
  const int errno_after = errno;
  const std::string where = host + ":" + std::to_string(port);
  if (bound <= 0) throw Error("cannot listen on " + where + ": " + bind_failure_reason(host, port, errno_after));
  // Linux: listen() on a socket that already listens only updates its backlog.
  if (::listen(ListeningSocket::of(svr), backlog) != 0)
    throw Error("cannot listen on " + where + ": listen(backlog " + std::to_string(backlog) + "): " + std::strerror(errno));
  return bound;
}

}  // namespace g4::server

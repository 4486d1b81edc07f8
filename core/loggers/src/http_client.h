// HTTP(S) requests for the loggers that talk to a server (MLflow's tracking
// server), over libcurl: TLS with the system's CA bundle (or a given one),
// bearer or basic authentication, a deadline on every request.
// Thread-safety: an HttpClient is immutable after construction; each
// request uses a handle of its own, so any thread may send.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace hpu::core {

struct HttpOptions {
  std::string bearer_token;            // "Authorization: Bearer <token>" when set
  std::string username, password;      // basic authentication when username is set
  bool verify_tls = true;              // false: accept any server certificate
  std::string ca_bundle;               // PEM file of trusted CAs (empty: the system's)
  std::chrono::milliseconds timeout{120'000};         // a whole request
  std::chrono::milliseconds connect_timeout{10'000};  // reaching the server
};

struct HttpResponse {
  long status = 0;    // the HTTP status; 0 when no response arrived
  std::string body;
  std::string error;  // why no response arrived (curl's words), empty otherwise
  bool tls_failed = false;  // the server's certificate was not trusted, or TLS failed

  bool reached() const { return status != 0; }
  bool ok() const { return status >= 200 && status < 300; }
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options);

  // `method` ("GET", "POST", "PUT") on `url` with `body` (sent when not
  // empty, or always for POST/PUT) of `content_type`. Never throws for
  // network trouble: the response says what happened.
  HttpResponse send(std::string_view method, const std::string& url, const std::string& body = {},
                    std::string_view content_type = "application/json") const;
  // PUT of the file at `path` as the body, streamed.
  HttpResponse putFile(const std::string& url, const std::string& path) const;

  const HttpOptions& options() const { return options_; }

 private:
  HttpOptions options_;
};

// `text` with every byte outside RFC 3986's unreserved set percent-encoded
// (a query value), or, with `keep_slashes`, a URL path of segments.
std::string urlEncode(std::string_view text, bool keep_slashes = false);

}  // namespace hpu::core

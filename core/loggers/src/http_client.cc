#include "http_client.h"

#include <curl/curl.h>
#include <spdlog/fmt/fmt.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <mutex>

namespace hpu::core {
namespace {

void initCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::size_t appendBody(char* data, std::size_t size, std::size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct HeadersDeleter {
  void operator()(curl_slist* h) const { curl_slist_free_all(h); }
};
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

HttpClient::HttpClient(HttpOptions options) : options_(std::move(options)) { initCurlOnce(); }

namespace {

// A handle set up with `options`, the method and the URL; the response body
// goes to `body`.
std::unique_ptr<CURL, CurlDeleter> prepare(const HttpOptions& options, std::string_view method, const std::string& url,
                                           std::string* body, curl_slist** headers, char* error) {
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, std::string(method).c_str());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, appendBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM: training threads keep their signals
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, options.verify_tls ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, options.verify_tls ? 2L : 0L);
  if (!options.ca_bundle.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, options.ca_bundle.c_str());
  if (!options.bearer_token.empty()) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
    curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, options.bearer_token.c_str());
  } else if (!options.username.empty()) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(c, CURLOPT_USERNAME, options.username.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, options.password.c_str());
  }
  *headers = curl_slist_append(*headers, "User-Agent: hpu-train");
  *headers = curl_slist_append(*headers, "Expect:");  // no 100-continue round trip for uploads
  return curl;
}

// Runs the request; the body received is in `received`.
HttpResponse perform(CURL* c, curl_slist* headers, std::string& received, const char* error) {
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  HttpResponse r;
  if (const CURLcode code = curl_easy_perform(c); code != CURLE_OK) {
    r.error = error[0] != '\0' ? error : curl_easy_strerror(code);
    r.tls_failed = code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CONNECT_ERROR ||
                   code == CURLE_SSL_CACERT_BADFILE || code == CURLE_SSL_CERTPROBLEM;
    return r;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  r.body = std::move(received);
  return r;
}

}  // namespace

HttpResponse HttpClient::send(std::string_view method, const std::string& url, const std::string& body,
                              std::string_view content_type) const {
  std::string received;
  char error[CURL_ERROR_SIZE] = {};
  curl_slist* raw_headers = nullptr;
  auto curl = prepare(options_, method, url, &received, &raw_headers, error);
  if (!body.empty() || method == "POST" || method == "PUT") {
    raw_headers = curl_slist_append(raw_headers, fmt::format("Content-Type: {}", content_type).c_str());
    curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  std::unique_ptr<curl_slist, HeadersDeleter> headers(raw_headers);
  return perform(curl.get(), headers.get(), received, error);
}

HttpResponse HttpClient::putFile(const std::string& url, const std::string& path) const {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) return {.status = 0, .body = {}, .error = fmt::format("cannot read {}", path)};
  std::fseek(file.get(), 0, SEEK_END);
  const long size = std::ftell(file.get());
  std::fseek(file.get(), 0, SEEK_SET);
  std::string received;
  char error[CURL_ERROR_SIZE] = {};
  curl_slist* raw_headers = nullptr;
  auto curl = prepare(options_, "PUT", url, &received, &raw_headers, error);
  raw_headers = curl_slist_append(raw_headers, "Content-Type: application/octet-stream");
  std::unique_ptr<curl_slist, HeadersDeleter> headers(raw_headers);
  curl_easy_setopt(curl.get(), CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_READDATA, file.get());
  curl_easy_setopt(curl.get(), CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
  return perform(curl.get(), headers.get(), received, error);
}

std::string urlEncode(std::string_view text, bool keep_slashes) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slashes && c == '/'))
      out += c;
    else
      out += fmt::format("%{:02X}", u);
  }
  return out;
}

}  // namespace hpu::core

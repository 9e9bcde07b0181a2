#include "test_certs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>

namespace gpuslice::k8s::testing {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "test certificate: %s failed\n", what);
    abort();
  }
}

}  // namespace

TestCertificate MakeSelfSignedCertificate(const std::string& dir) {
  EVP_PKEY* key = EVP_RSA_gen(2048);
  Check(key != nullptr, "EVP_RSA_gen");
  X509* cert = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("fake-apiserver"), -1, -1,
                             0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost"},
                            std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    Check(ext != nullptr, "X509V3_EXT_conf_nid");
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
  Check(X509_sign(cert, key, EVP_sha256()) > 0, "X509_sign");

  TestCertificate out{dir + "/cert.pem", dir + "/key.pem"};
  FILE* f = fopen(out.cert_file.c_str(), "w");
  Check(f != nullptr && PEM_write_X509(f, cert) == 1, "writing cert.pem");
  fclose(f);
  f = fopen(out.key_file.c_str(), "w");
  Check(f != nullptr && PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1, "writing key.pem");
  fclose(f);
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

}  // namespace gpuslice::k8s::testing

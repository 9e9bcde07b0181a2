// test_certs.h — a throwaway self-signed certificate for 127.0.0.1, made
// with OpenSSL at test time, so that the Kubernetes client is tested over
// real HTTPS with CA verification (no certificate is committed).
#ifndef GPUSLICE_TESTS_K8S_TEST_CERTS_H_
#define GPUSLICE_TESTS_K8S_TEST_CERTS_H_

#include <string>

namespace gpuslice::k8s::testing {

struct TestCertificate {
  std::string cert_file;  // PEM; also the CA to trust
  std::string key_file;   // PEM
};

// Writes cert.pem and key.pem into `dir`. Aborts the test binary on failure.
TestCertificate MakeSelfSignedCertificate(const std::string& dir);

}  // namespace gpuslice::k8s::testing

#endif  // GPUSLICE_TESTS_K8S_TEST_CERTS_H_

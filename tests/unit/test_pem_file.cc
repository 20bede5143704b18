// SPDX-License-Identifier: BSD-3-Clause
// pem_problem: a TLS file that is not PEM of its kind, or is cut short
// mid-rotation, is refused by psgate (at start, and at a reconnect, where the
// last good files stay in use) instead of handed to gRPC, whose only word
// for it was "empty address list" on every connection attempt.
#include "psgate/pem_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "temp_dir.h"

namespace psgate {
namespace {

using testing::TempDir;

// A block's body: base64 of a small DER SEQUENCE (30 03 02 01 01).
constexpr std::string_view kDer = "MAMCAQE=";

std::string block(std::string_view label, std::string_view body = kDer) {
  return "-----BEGIN " + std::string(label) + "-----\n" + std::string(body) + "\n-----END " + std::string(label) +
         "-----\n";
}

bool says(const std::string& problem, std::string_view words) { return problem.find(words) != std::string::npos; }

TEST(PemFile, CertificatesAndKeysOfEveryCommonFormPass) {
  EXPECT_EQ(pem_problem(block("CERTIFICATE"), PemKind::kCertificates), "");
  // Every line CRLF, as a file written on Windows.
  std::string crlf;
  for (char c : block("CERTIFICATE")) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_EQ(pem_problem(crlf, PemKind::kCertificates), "");
  // A bundle with text around its blocks (as `openssl x509 -text` writes), CRLF lines.
  EXPECT_EQ(pem_problem("subject=CN = a\r\n" + block("CERTIFICATE") + "\nissuer=x\n" + block("CERTIFICATE"),
                        PemKind::kCertificates),
            "");
  for (const char* label : {"PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"})
    EXPECT_EQ(pem_problem(block(label), PemKind::kPrivateKey), "") << label;
  // `openssl ecparam -genkey` writes the curve's OID first: not a SEQUENCE, and fine.
  EXPECT_EQ(pem_problem(block("EC PARAMETERS", "BggqhkjOPQMBBw==") + block("EC PRIVATE KEY"), PemKind::kPrivateKey),
            "");
}

TEST(PemFile, WhatIsNotPemOfItsKindSaysWhy) {
  EXPECT_TRUE(says(pem_problem("garbage not pem\n", PemKind::kCertificates), "no PEM CERTIFICATE block"));
  EXPECT_TRUE(says(pem_problem(block("PRIVATE KEY"), PemKind::kCertificates), "no PEM CERTIFICATE block"))
      << "a key named as the CA";
  EXPECT_TRUE(says(pem_problem(block("CERTIFICATE"), PemKind::kPrivateKey), "no PEM PRIVATE KEY block"));
  EXPECT_TRUE(says(pem_problem(block("ENCRYPTED PRIVATE KEY"), PemKind::kPrivateKey), "no passphrase"));
  EXPECT_TRUE(says(pem_problem("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\n" +
                                   std::string(kDer) + "\n-----END RSA PRIVATE KEY-----\n",
                               PemKind::kPrivateKey),
                   "no passphrase"));
  EXPECT_TRUE(says(pem_problem(block("CERTIFICATE", "bm90IGRlcg=="), PemKind::kCertificates), "no DER structure"))
      << "base64 of \"not der\"";
  EXPECT_TRUE(says(pem_problem(block("CERTIFICATE", "MAMC*QE="), PemKind::kCertificates), "not base64"));
  EXPECT_TRUE(says(pem_problem(block("CERTIFICATE", "MAMCAQ"), PemKind::kCertificates), "incomplete"));
  EXPECT_TRUE(says(pem_problem(block("CERTIFICATE", "MA==MAMC"), PemKind::kCertificates), "incomplete"));
  EXPECT_TRUE(
      says(pem_problem("-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END X509 CRL-----\n", PemKind::kCertificates),
           "closes a CERTIFICATE block"));
  EXPECT_TRUE(says(pem_problem("-----END CERTIFICATE-----\n", PemKind::kCertificates), "no BEGIN line"));
  EXPECT_TRUE(says(pem_problem(block("CERTIFICATE") + "-----BEGIN CERT", PemKind::kCertificates), "cut short"));
  // A one-line PEM (a secret whose newlines became spaces): refused, and the
  // message quotes none of it, the key least of all.
  const std::string one_line = "-----BEGIN PRIVATE KEY----- MAMCAQE= -----END PRIVATE KEY-----\n";
  const std::string said = pem_problem(one_line, PemKind::kPrivateKey);
  EXPECT_TRUE(says(said, "not a whole BEGIN or END line")) << said;
  EXPECT_FALSE(says(said, "MAMCAQE")) << said;
  // Indented armour (pasted from YAML): OpenSSL reads BEGIN only at a line's start.
  EXPECT_TRUE(says(pem_problem("  " + block("CERTIFICATE"), PemKind::kCertificates), "indented"));
  EXPECT_TRUE(says(pem_problem("\xEF\xBB\xBF" + block("CERTIFICATE"), PemKind::kCertificates), "byte order mark"));
}

// The rotation the test session met: a CA file written in place, read half
// written. Every cut of a two-certificate bundle is refused or is the whole
// first certificate (which is PEM, and what a reader may see between them).
TEST(PemFile, ABundleCutAnywhereIsRefusedUnlessWholeBlocksAreLeft) {
  const std::string one = block("CERTIFICATE", "MIIBAAAAAAAAAAAAAAAA");
  const std::string bundle = one + one;
  for (size_t cut = 1; cut < bundle.size(); ++cut) {
    const std::string problem = pem_problem(std::string_view(bundle).substr(0, cut), PemKind::kCertificates);
    // The first block whole, and at most "----" of the next line: text.
    const bool whole_first = cut >= one.size() - 1 && cut <= one.size() + 4;
    if (!whole_first && cut != bundle.size() - 1) {  // (the whole bundle less its last newline)
      EXPECT_NE(problem, "") << "cut at " << cut;
    }
  }
  EXPECT_EQ(pem_problem(bundle, PemKind::kCertificates), "");
}

TEST(PemFile, ReadPemFileNamesTheFileAndTheProblem) {
  TempDir t("psgate-pem");
  std::ofstream(t.path("junk.pem")) << "garbage not pem\n";
  auto junk = read_pem_file(t.path("junk.pem"), PemKind::kCertificates);
  ASSERT_FALSE(junk);
  EXPECT_EQ(junk.error(), t.path("junk.pem") + ": no PEM CERTIFICATE block in it (is it PEM?)");
  std::ofstream(t.path("ca.pem")) << block("CERTIFICATE");
  auto ca = read_pem_file(t.path("ca.pem"), PemKind::kCertificates);
  ASSERT_TRUE(ca) << ca.error();
  EXPECT_EQ(*ca, block("CERTIFICATE"));
  std::ofstream(t.path("empty.pem")).close();
  EXPECT_EQ(read_pem_file(t.path("empty.pem"), PemKind::kPrivateKey).error(), t.path("empty.pem") + " is empty");
}

}  // namespace
}  // namespace psgate

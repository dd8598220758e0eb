// corral-authd's request and answer (net/authd_wire.h): what goes on the socket, and the
// headers the server refuses before it reads a payload.
#include "net/authd_wire.h"

#include <gtest/gtest.h>

namespace corral::net {
namespace {

TEST(AuthdWire, ARequestRoundTrips) {
  const std::string bytes = encode_authd_request(AuthdRequest{0u, "corral-controller-v1"});
  ASSERT_EQ(bytes.size(), kAuthdRequestHeader + 20);
  auto n = authd_payload_length(std::string_view(bytes).substr(0, kAuthdRequestHeader));
  ASSERT_TRUE(n) << n.message();
  EXPECT_EQ(*n, 20u);
  AuthdRequest back = decode_authd_request(bytes);
  ASSERT_TRUE(back.restrict_uid);
  EXPECT_EQ(*back.restrict_uid, 0u);
  EXPECT_EQ(back.payload, "corral-controller-v1");
  EXPECT_FALSE(decode_authd_request(encode_authd_request(AuthdRequest{std::nullopt, "x"})).restrict_uid);
}

TEST(AuthdWire, HeadersThatAreNotOursOrTooLongAreRefused) {
  std::string header = encode_authd_request(AuthdRequest{std::nullopt, ""});
  header[0] = 'X';
  EXPECT_FALSE(authd_payload_length(header));
  EXPECT_FALSE(authd_payload_length("CAS1"));
  std::string too_long = encode_authd_request(AuthdRequest{std::nullopt, std::string(kAuthdMaxPayload, 'p')});
  too_long[kAuthdRequestHeader - 2] = '\xff';  // claims 65,000-odd bytes
  auto n = authd_payload_length(std::string_view(too_long).substr(0, kAuthdRequestHeader));
  ASSERT_FALSE(n);
  EXPECT_NE(n.message().find("at most 1024 bytes"), std::string::npos);
}

TEST(AuthdWire, AnAnswerCarriesItsStatusAndText) {
  const std::string ok = encode_authd_answer(true, "corral1.abc");
  EXPECT_EQ(ok[0], 0);
  EXPECT_EQ(ok.substr(kAuthdAnswerHeader), "corral1.abc");
  const std::string no = encode_authd_answer(false, "why");
  EXPECT_EQ(no[0], 1);
  EXPECT_EQ(static_cast<unsigned char>(no[2]), 3u);
}

}  // namespace
}  // namespace corral::net

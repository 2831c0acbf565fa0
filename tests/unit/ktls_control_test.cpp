// The kTLS receive path's record handling (src/tls/ktls.hpp), without a kernel that has kTLS:
// the record type read from a recvmsg's control messages, and the peer's alerts and handshake
// messages fed in the pieces the kernel returns them in. What the fuzzer (fuzz/ktls_record_fuzz)
// found stays here.
#include "tls/ktls.hpp"

#include <gtest/gtest.h>

#include <linux/tls.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

namespace {

using galay::tls::detail::ControlRead;
using galay::tls::detail::KtlsTrack;
using galay::tls::detail::read_control;
using galay::tls::detail::received_record_type;

ControlRead feed(KtlsTrack& t, unsigned char type, std::vector<unsigned char> bytes) {
    return read_control(t, type, bytes.data(), bytes.size());
}

} // namespace

TEST(KtlsControl, ANewSessionTicketInPiecesIsSkippedThenCloseNotifyEndsTheStream) {
    KtlsTrack t;
    EXPECT_EQ(feed(t, 22, {4, 0}).kind, ControlRead::Kind::more); // the header, cut in two
    EXPECT_EQ(feed(t, 22, {0, 3, 9}).kind, ControlRead::Kind::more);
    EXPECT_EQ(feed(t, 22, {9, 9}).kind, ControlRead::Kind::more); // the rest of its body
    EXPECT_EQ(t.control_skip, 0u);
    EXPECT_EQ(feed(t, 21, {1, 0}).kind, ControlRead::Kind::close_notify);
}

TEST(KtlsControl, AnAlertInsideAHandshakeMessageIsRefused) {
    // Three bytes of a handshake header, then an alert record: the header's 4 bytes must not be
    // filled from the alert (nor written past: the gathered bytes are counted across records).
    KtlsTrack t;
    EXPECT_EQ(feed(t, 22, {4, 0, 0}).kind, ControlRead::Kind::more);
    const ControlRead r = feed(t, 21, {2, 40});
    EXPECT_EQ(r.kind, ControlRead::Kind::refused);
    EXPECT_NE(r.reason.find("inside a message"), std::string::npos) << r.reason;
    EXPECT_LE(t.control_have, t.control.size());
    // And a handshake record in the middle of an alert.
    KtlsTrack u;
    EXPECT_EQ(feed(u, 21, {1}).kind, ControlRead::Kind::more);
    EXPECT_EQ(feed(u, 22, {4, 0, 0, 0}).kind, ControlRead::Kind::refused);
}

TEST(KtlsControl, OtherRecordsAndMessagesAreRefusedWithAReason) {
    KtlsTrack t;
    const ControlRead ccs = feed(t, 20, {1});
    EXPECT_EQ(ccs.kind, ControlRead::Kind::refused);
    EXPECT_NE(ccs.reason.find("type 20"), std::string::npos) << ccs.reason;
    KtlsTrack k;
    EXPECT_NE(feed(k, 22, {24, 0, 0, 1, 0}).reason.find("KeyUpdate"), std::string::npos);
    KtlsTrack a;
    EXPECT_NE(feed(a, 21, {2, 40}).reason.find("alert 40"), std::string::npos);
}

TEST(KtlsControl, TheRecordTypeComesOnlyFromAWholeControlMessage) {
    alignas(cmsghdr) unsigned char buf[CMSG_SPACE(1) * 2]{};
    auto* cm = reinterpret_cast<cmsghdr*>(buf);
    cm->cmsg_level = SOL_TLS;
    cm->cmsg_type = TLS_GET_RECORD_TYPE;
    cm->cmsg_len = CMSG_LEN(1);
    *CMSG_DATA(cm) = 21;
    EXPECT_EQ(received_record_type(buf, CMSG_SPACE(1)), 21);
    EXPECT_EQ(received_record_type(buf, 0), 23); // none: application data
    cm->cmsg_len = sizeof(cmsghdr);              // no room for its byte
    EXPECT_EQ(received_record_type(buf, CMSG_SPACE(1)), 23);
    cm->cmsg_len = sizeof buf + 1; // longer than the buffer
    EXPECT_EQ(received_record_type(buf, sizeof buf), 23);
    cm->cmsg_len = CMSG_LEN(1);
    cm->cmsg_type = TLS_GET_RECORD_TYPE + 1; // another message
    EXPECT_EQ(received_record_type(buf, CMSG_SPACE(1)), 23);
}

package workerd_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/internal/redistest"
)

// secureRedis is a redis-server that asks for credentials, on a plain
// port and on a TLS port with a certificate of a CA the test made.
type secureRedis struct {
	Port, TLSPort      int
	CAPath, CA         string // the CA's certificate: file, PEM text
	Password           string // the default user's
	User, UserPassword string // an ACL user's
}

// env is the environment resp_test.mjs reads the server from.
func (s *secureRedis) env() []string {
	return []string{
		"PRESENCE_TEST_REDIS_HOST=127.0.0.1",
		"PRESENCE_TEST_REDIS_PORT=" + strconv.Itoa(s.Port),
		"PRESENCE_TEST_REDIS_TLS_PORT=" + strconv.Itoa(s.TLSPort),
		"PRESENCE_TEST_REDIS_CA_FILE=" + s.CAPath,
		"PRESENCE_TEST_REDIS_PASSWORD=" + s.Password,
		"PRESENCE_TEST_REDIS_USER=" + s.User,
		"PRESENCE_TEST_REDIS_USER_PASSWORD=" + s.UserPassword,
	}
}

// startSecureRedis starts a redis-server (skipping where there is none)
// with requirepass and an ACL user limited to what the presence scripts
// run, listening on a free plain port and a free TLS port. Its TLS
// support is checked: a redis-server built without it skips the test.
func startSecureRedis(t testing.TB) *secureRedis {
	t.Helper()
	dir := t.TempDir()
	s := &secureRedis{
		Password:     "default-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		User:         "presence",
		UserPassword: "presence-secret",
	}
	s.CA = writeCerts(t, dir)
	s.CAPath = filepath.Join(dir, "ca.crt")
	s.TLSPort = freePort(t)
	inst := redistest.Server(t,
		"--tls-port", strconv.Itoa(s.TLSPort),
		"--tls-cert-file", filepath.Join(dir, "redis.crt"),
		"--tls-key-file", filepath.Join(dir, "redis.key"),
		"--tls-ca-cert-file", s.CAPath,
		"--tls-auth-clients", "no",
	)
	s.Port = inst.Port
	if tls, _ := inst.Do("CONFIG", "GET", "tls-port"); !strings.Contains(fmt.Sprint(tls), strconv.Itoa(s.TLSPort)) {
		t.Skipf("redis-server does not listen on its --tls-port (built without TLS?): CONFIG GET tls-port = %v", tls)
	}
	// The ACL user may run the scripts and the commands they call, and
	// nothing else; then the default user needs the password.
	for _, cmd := range [][]string{
		{"ACL", "SETUSER", s.User, "on", ">" + s.UserPassword, "~*", "&*", "+@all", "-@admin", "-@dangerous"},
		{"CONFIG", "SET", "requirepass", s.Password},
	} {
		if _, err := inst.Do(cmd...); err != nil {
			t.Fatalf("redis-server: %v: %v", cmd[:2], err)
		}
	}
	return s
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeCerts makes a CA and a server certificate for 127.0.0.1 and
// localhost signed by it, writes ca.crt, redis.crt and redis.key to dir,
// and returns the CA's certificate as PEM.
func writeCerts(t testing.TB, dir string) string {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := newKey()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "presence test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey := newKey()
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for name, b := range map[string][]byte{
		"ca.crt":    caPEM,
		"redis.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		"redis.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return string(caPEM)
}

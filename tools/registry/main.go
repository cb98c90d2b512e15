// The OCI registry of the local stack and the tests: go-containerregistry's pkg/registry (the only registry built
// here that serves the referrers API) behind TLS and HTTP basic authentication, so the credential path is exercised.
// The credentials come from the environment, never from flags, so they do not show in a process listing.
package main

import (
	"crypto/subtle"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	address := flag.String("address", "127.0.0.1:0", "where to listen")
	certFile := flag.String("tls-cert", "", "the serving certificate (PEM)")
	keyFile := flag.String("tls-key", "", "its private key (PEM)")
	referrers := flag.Bool("referrers", true, "serve the referrers API (false: clients must use the tag fallback)")
	flag.Parse()
	user, password := os.Getenv("REGISTRY_USERNAME"), os.Getenv("REGISTRY_PASSWORD")
	if *certFile == "" || *keyFile == "" || user == "" || password == "" {
		log.Fatal("-tls-cert, -tls-key, REGISTRY_USERNAME and REGISTRY_PASSWORD are required")
	}
	listener, err := net.Listen("tcp", *address)
	if err != nil {
		log.Fatal(err)
	}
	// The first line of stdout is what the stack waits for: the address actually bound.
	fmt.Printf("listening on %s\n", listener.Addr())
	handler := registry.New(registry.WithReferrersSupport(*referrers), registry.Logger(log.New(os.Stderr, "", log.LstdFlags)))
	server := &http.Server{
		Handler:           basicAuth(user, password, handler),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Fatal(server.ServeTLS(listener, *certFile, *keyFile))
}

func basicAuth(user, password string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="ptah-registry"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/chime-scheduler/chime/node/tlsconf"
)

// runCerts runs `chime certs`: a development CA (made once in --dir, then
// reused) and a certificate signed by it for one node, for a local TLS
// cluster (scripts/cluster.sh with CHIME_TLS=1). Production certificates
// come from the operator's own CA.
func runCerts(_ context.Context, args []string, stdout, stderr io.Writer, _ func(string) string) error {
	fs := flag.NewFlagSet("chime certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "`directory` of the CA (ca.pem, ca-key.pem) and the certificates (required)")
	name := fs.String("name", "", "node `name`: writes NAME.pem and NAME-key.pem (required)")
	hosts := fs.String("host", "127.0.0.1,localhost", "comma list of the IPs and DNS names the certificate is valid for")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *name == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("certs: want --dir and --name, and no arguments")
	}
	if strings.ContainsAny(*name, "/\\") || strings.HasPrefix(*name, ".") {
		return fmt.Errorf("certs: --name %q must be a plain file name", *name)
	}
	f, err := tlsconf.WriteDev(*dir, *name, strings.Split(*hosts, ","))
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	fmt.Fprintf(stdout, "--tls-cert %s --tls-key %s --tls-ca %s\n", f.Cert, f.Key, f.CA)
	return nil
}

"""The options that name Docker Engines (--hosts, --hosts-from-config, the TLS files), shared by run, plan, cleanup
and doctor."""

from __future__ import annotations

import argparse

from distval.cli import values as cli_values
from distval.config.engine_hosts import FROM_CONFIG_FLAG


def add_hosts_options(parser: argparse.ArgumentParser, tls: bool = False, from_config: bool = False) -> None:
    parser.add_argument(
        "--hosts",
        metavar="URL[,URL...]",
        type=cli_values.hosts_list,
        help="Docker Engines to place the nodes on, in order: unix:///PATH, tcp://HOST:PORT, https://HOST:PORT (TLS), "
        "ssh://USER@HOST (over every scenario's hosts)",
    )
    if from_config:
        parser.add_argument(
            FROM_CONFIG_FLAG,
            action="store_true",
            help="honour the config's hosts keys: run the ranks with host networking on the Engines the file names and "
            "copy the image to them (without it, a hosts key is refused)",
        )
    if tls:
        parser.add_argument(
            "--tls-ca", metavar="PATH", help="with https:// hosts: the CA of their Engines (else $DOCKER_CERT_PATH/ca.pem)"
        )
        parser.add_argument("--tls-cert", metavar="PATH", help="with https:// hosts: the client certificate")
        parser.add_argument("--tls-key", metavar="PATH", help="with https:// hosts: the client key")

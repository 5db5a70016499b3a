# Copyright 2026 rog_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""SROS2 keystore of `rog security keystore`: layout, XML, topics, certificate chain, S/MIME."""

import base64
import email
import fnmatch
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from rog_ros.nodes import keystore
from rog_ros.nodes.routing import link_stats, server_inbox, server_outbox, train_status, \
    worker_inbox, worker_outbox
from rog_ros.transport.topics import dds_topic_name, resolve

x509 = pytest.importorskip('cryptography.x509')
pkcs7 = pytest.importorskip('cryptography.hazmat.primitives.serialization.pkcs7')

NS = '/fleet7'
ENCLAVE_FILES = {'cert.pem', 'key.pem', 'permissions.xml', 'permissions.p7s', 'governance.p7s',
                 'identity_ca.cert.pem', 'permissions_ca.cert.pem'}


@pytest.fixture(scope='module')
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp('ks') / 'keystore'
    enclaves = keystore.create_keystore(root, namespace=NS, domain_ids=[7], per_rank=2)
    return root, enclaves


def _dds(topics):
    return [dds_topic_name(resolve(t, NS)) for t in topics]


def _rules(root, enclave):
    tree = ET.parse(root / 'enclaves' / enclave.strip('/') / 'permissions.xml')
    grant = tree.getroot().find('permissions/grant')
    rule = grant.find('allow_rule')
    return (grant, [t.text for t in rule.findall('publish/topics/topic')],
            [t.text for t in rule.findall('subscribe/topics/topic')])


def _allowed(topic, patterns):
    return any(fnmatch.fnmatchcase(topic, p) for p in patterns)


def test_layout_is_that_of_ros2_security(store):
    root, enclaves = store
    assert enclaves == ['/rog_ros/server', '/rog_ros/worker', '/rog_ros/netmon',
                        '/rog_ros/worker_0', '/rog_ros/worker_1']
    assert sorted(os.listdir(root / 'public')) == ['ca.cert.pem', 'identity_ca.cert.pem',
                                                   'permissions_ca.cert.pem']
    assert sorted(os.listdir(root / 'private')) == ['ca.key.pem', 'identity_ca.key.pem',
                                                    'permissions_ca.key.pem']
    for name in enclaves:
        d = root / 'enclaves' / name.strip('/')
        assert set(os.listdir(d)) == ENCLAVE_FILES
        ca_pem = (root / 'public' / 'ca.cert.pem').read_bytes()
        governance = (root / 'enclaves' / 'governance.p7s').read_bytes()
        assert (d / 'identity_ca.cert.pem').read_bytes() == ca_pem
        assert (d / 'governance.p7s').read_bytes() == governance
        assert os.stat(d / 'key.pem').st_mode & 0o077 == 0
    assert os.stat(root / 'private/ca.key.pem').st_mode & 0o077 == 0
    with pytest.raises(keystore.KeystoreError, match='not empty'):
        keystore.create_keystore(root)


def test_xml_is_well_formed_and_governance_locks_the_domain(store):
    root, enclaves = store
    gov = ET.parse(root / 'enclaves' / 'governance.xml').getroot()
    rule = gov.find('domain_access_rules/domain_rule')
    assert [d.text for d in rule.findall('domains/id')] == ['7']
    assert rule.find('allow_unauthenticated_participants').text == 'false'
    assert rule.find('topic_access_rules/topic_rule/data_protection_kind').text == 'ENCRYPT'
    for name in enclaves:
        grant, _, _ = _rules(root, name)
        assert grant.get('name') == name
        assert grant.find('subject_name').text == f'CN={name}'
        assert grant.find('default').text == 'DENY'
        assert [d.text for d in grant.findall('allow_rule/domains/id')] == ['7']


def test_permissions_name_exactly_the_fleets_topics(store):
    root, _ = store
    n = 3
    TRAIN_STATUS = train_status('rog_worker_1')          # noqa: N806 - one node's topic
    LINK_STATS = link_stats('netmon_1')                 # noqa: N806
    _, pub, sub = _rules(root, '/rog_ros/server')
    assert all(_allowed(t, pub) for t in _dds(server_outbox(n) + [TRAIN_STATUS]))
    assert all(_allowed(t, sub) for t in _dds(server_inbox() + [TRAIN_STATUS]))
    assert not any(_allowed(t, pub) for t in _dds(server_inbox()))    # cannot forge uplink
    _, pub, sub = _rules(root, '/rog_ros/worker')
    assert all(_allowed(t, pub) for t in _dds(worker_outbox() + [TRAIN_STATUS]))
    assert all(_allowed(t, sub) for r in range(n) for t in _dds(worker_inbox(r)))
    assert not any(_allowed(t, pub) for t in _dds(worker_inbox(0)))   # cannot forge downlink
    assert not _allowed(_dds([LINK_STATS])[0], pub)
    _, pub, sub = _rules(root, '/rog_ros/worker_1')
    assert all(_allowed(t, sub) for t in _dds(worker_inbox(1)))
    assert not any(_allowed(t, sub) for t in _dds(worker_inbox(0)))   # not another's downlink
    _, pub, sub = _rules(root, '/rog_ros/netmon')
    fleet = [t for t in pub + sub if t.startswith('rt/fleet7/')]
    assert len(fleet) == 1 and _allowed(_dds([LINK_STATS])[0], fleet)
    assert _allowed('rt/diagnostics', pub)
    assert not any(t.startswith('rt/rog/') for t in pub + sub)       # the namespace is ours


def test_managed_nodes_may_publish_their_lifecycle_transitions(store):
    # rclpy's LifecycleNode creates a ~/transition_event writer in its constructor: a denied
    # writer is an exception there, and the node never starts under its enclave
    root, _ = store
    for enclave, node in (('/rog_ros/server', 'rog_server'), ('/rog_ros/worker', 'rog_worker_1'),
                          ('/rog_ros/worker_1', 'rog_worker_1')):
        _, pub, _ = _rules(root, enclave)
        assert _allowed(f'rt/{node}/transition_event', pub), enclave
        assert _allowed(f'rt/fleet7/{node}/transition_event', pub), enclave     # a namespace


def test_certificates_chain_to_the_ca(store):
    root, enclaves = store
    ca = x509.load_pem_x509_certificate((root / 'public/ca.cert.pem').read_bytes())
    ca.verify_directly_issued_by(ca)
    for name in enclaves:
        cert = x509.load_pem_x509_certificate(
            (root / 'enclaves' / name.strip('/') / 'cert.pem').read_bytes())
        cert.verify_directly_issued_by(ca)
        assert cert.subject.rfc4514_string() == f'CN={name}'
    other = keystore._Ca('someone else', ca.not_valid_before_utc, 1)
    stranger = x509.load_pem_x509_certificate(other.issue('/rog_ros/server')[1])
    with pytest.raises(Exception):
        stranger.verify_directly_issued_by(ca)


def _smime_parts(path):
    msg = email.message_from_bytes(path.read_bytes())
    assert msg.get_content_type() == 'multipart/signed'
    content, signature = msg.get_payload()
    return content.as_bytes(), base64.b64decode(signature.get_payload())


def test_signed_files_hold_the_xml_and_the_ca_signature(store):
    root, enclaves = store
    ca_pem = (root / 'public/ca.cert.pem').read_bytes()
    files = [('enclaves/governance.p7s', 'enclaves/governance.xml')]
    files += [(f'enclaves{n}/permissions.p7s', f'enclaves{n}/permissions.xml') for n in enclaves]
    for p7s, xml in files:
        content, signature = _smime_parts(root / p7s)
        assert content.replace(b'\r\n', b'\n').strip() == (root / xml).read_bytes().strip()
        certs = pkcs7.load_der_pkcs7_certificates(signature)
        assert [c.public_bytes(x509_encoding()) for c in certs] == [ca_pem]
    if shutil.which('openssl'):          # a full cryptographic check where openssl exists
        for p7s, _ in files:
            proc = subprocess.run(['openssl', 'smime', '-verify', '-in', str(root / p7s),
                                   '-CAfile', str(root / 'public/ca.cert.pem'), '-out',
                                   os.devnull], capture_output=True, text=True, timeout=30)
            assert proc.returncode == 0, proc.stderr


def x509_encoding():
    from cryptography.hazmat.primitives.serialization import Encoding
    return Encoding.PEM


def test_bad_options_are_refused_in_one_line(tmp_path):
    with pytest.raises(keystore.KeystoreError, match='namespace'):
        keystore.create_keystore(tmp_path / 'a', namespace='rog')
    with pytest.raises(keystore.KeystoreError, match='domain'):
        keystore.create_keystore(tmp_path / 'b', domain_ids=[300])


def test_copies_made_where_symlinks_fail_keep_the_private_keys_private(tmp_path, monkeypatch):
    # (a file system without symlinks: the CA key's copies were written 0644)
    def no_symlinks(*args, **kwargs):
        """Refuse to make a link, as such a file system does."""
        raise OSError(1, 'Operation not permitted')

    monkeypatch.setattr(os, 'symlink', no_symlinks)
    root = tmp_path / 'keystore'
    keystore.create_keystore(root, namespace=NS)
    for name in ('ca', 'identity_ca', 'permissions_ca'):
        path = root / 'private' / f'{name}.key.pem'
        assert not path.is_symlink()
        assert path.read_bytes() == (root / 'private/ca.key.pem').read_bytes()
        assert os.stat(path).st_mode & 0o077 == 0, name
    assert os.stat(root / 'public/identity_ca.cert.pem').st_mode & 0o777 == \
        os.stat(root / 'public/ca.cert.pem').st_mode & 0o777

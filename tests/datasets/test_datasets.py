import argparse
import json
import pickle
import tarfile
import urllib.error

import numpy as np
import pytest
from PIL import Image

from kit.datasets import DATASETS, align_inputs, evaluate_accuracy, get_dataset
from kit.datasets.cail2019 import Cail2019
from kit.datasets.cifar import CLIP_MEAN, CLIP_STD, Cifar100
from kit.datasets.criteo import Criteo
from kit.datasets.fake import FakeDataset
from kit.datasets.fetch import ChecksumMismatch, Source, fetch, verify
from kit.datasets.imagenet import IMAGENET_MEAN, IMAGENET_STD, ImageNet
from kit.datasets.squad import Squad
from kit.errors import InvalidParameter, KitError, MissingResource, UnknownNameError
from kit.models.spec import InputSpec, WeightsInfo

RANDOM = WeightsInfo("random", "seed 0")
LOCAL = WeightsInfo("local", "data/weights/x")

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    ".",
    "dog",
    "a",
    "rug",
    "where",
    "did",
    "sit",
    "who",
    "?",
    "##s",
]


def wordpiece(words=WORDS):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    return tok, vocab


CONTEXT = "The cat sat on the mat. The dog sat on a rug."


def write_squad(path, questions):
    qas = [
        {"id": qid, "question": q, "answers": [{"text": a, "answer_start": 0} for a in golds]}
        for qid, q, golds in questions
    ]
    data = {
        "version": "1.1",
        "data": [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": qas}]}],
    }
    (path / "dev-v1.1.json").write_text(json.dumps(data))


class PointAt:
    """A stand-in QA model: high start/end logits on chosen context words."""

    def __init__(self, vocab, spans):
        self.vocab, self.spans = vocab, spans  # spans: list per row of (start word, end word)

    def __call__(self, inputs):
        ids, seg = inputs["input_ids.1"], inputs["token_type_ids.1"]
        start, end = np.full(ids.shape, -5.0), np.full(ids.shape, -5.0)
        for row in range(len(ids)):
            s_word, e_word = self.spans[min(row, len(self.spans) - 1)]
            ctx = seg[row] == 1
            s_pos = np.flatnonzero(ctx & (ids[row] == self.vocab[s_word]))
            e_pos = np.flatnonzero(ctx & (ids[row] == self.vocab[e_word]))
            if len(s_pos) and len(e_pos):
                start[row, s_pos[0]], end[row, e_pos[e_pos >= s_pos[0]][0]] = 5.0, 5.0
        return [start, end]


def test_squad_features_predictions_and_both_denominators(tmp_path):
    tok, vocab = wordpiece()
    write_squad(
        tmp_path,
        [
            ("q1", "Where did the cat sit?", ["the mat", "mat"]),
            ("q2", "Who sat on a rug?", ["the dog", "dog"]),
        ],
    )
    ds = Squad(tmp_path, tokenizer=tok)
    assert len(ds) == 2  # one 384-token window per question
    batch = next(ds.batches(batch_size=2))
    assert (
        batch.inputs["input_ids.1"].shape == (2, 384)
        and batch.inputs["input_ids.1"].dtype == np.int64
    )
    row = batch.inputs["input_ids.1"][0]
    # [CLS] 6 question tokens [SEP] 14 context tokens (each word on its own: "mat." -> mat .) [SEP]
    assert (
        row[0] == vocab["[CLS]"] and batch.inputs["attention_mask.1"][0].sum() == 1 + 6 + 1 + 14 + 1
    )
    assert ds.features[0].tokens[8:15] == ["the", "cat", "sat", "on", "the", "mat", "."]
    assert (row[23:] == 0).all() and batch.inputs["token_type_ids.1"][0][8:23].tolist() == [1] * 15
    model = PointAt(vocab, [("mat", "mat"), ("dog", "sat")])
    out = ds.evaluate(model, batch_size=2)  # rows of equal length: the batch mask changes nothing
    # q1 -> "mat" (get_final_text cuts "mat." to the predicted "mat"); q2 -> "dog sat" vs "dog"
    assert out["f1_official"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert out["exact_match_official"] == pytest.approx(50.0)
    # one feature per question here
    assert out["value"] == pytest.approx(out["f1_official"], abs=1e-5)
    preds, count = ds.predictions((b, model(b.inputs)) for b in ds.batches(2))
    assert preds == {"q1": "mat", "q2": "dog sat"} and count == 2
    with pytest.raises(InvalidParameter, match="full batch"):
        next(ds.batches(batch_size=3))  # ByteMLPerf evaluates full batches only


def test_squad_sliding_window_and_max_context(tmp_path):
    tok, vocab = wordpiece()
    write_squad(tmp_path, [("q2", "Who sat on a rug?", ["the dog"])])
    # 16 tokens: [CLS] 6 question tokens [SEP] 7 context tokens [SEP]; windows every 4 tokens
    ds = Squad(tmp_path, tokenizer=tok, max_seq_length=16, doc_stride=4)
    assert len(ds) == 3  # the 14 context tokens: windows at 0-6, 4-10, 8-13
    dog_flags = [
        f.max_context[p] for f in ds.features for p, t in enumerate(f.tokens) if t == "dog"
    ]
    # "dog" is best in the middle window, not at the edge of the last
    assert dog_flags == [True, False]
    out = ds.evaluate(PointAt(vocab, [("dog", "dog")]), batch_size=1)
    # the answer is found once, but ByteMLPerf divides by the 3 evaluated features
    assert out["f1_official"] == pytest.approx(100.0) and out["value"] == pytest.approx(33.33333)
    assert out["samples"] == 3 and out["questions"] == 1


def test_squad_data_percent_and_tf_logits(tmp_path):
    tok, vocab = wordpiece()
    write_squad(tmp_path, [("q1", "Where did the cat sit?", ["mat"]), ("q2", "Who sat?", ["dog"])])
    ds = Squad(
        tmp_path, {"ids": "input_ids.1", "mask": "m", "segment": "token_type_ids.1"}, tokenizer=tok
    )

    def tf_model(inputs):  # one [batch, seq, 2] logits tensor, as the TF BERT returns
        s, e = PointAt(vocab, [("mat", "mat")])(inputs)
        return [np.stack([s, e], axis=-1)]

    out = ds.evaluate(tf_model, batch_size=1, data_percent=50)
    assert out["samples"] == 1 and out["questions"] == 1 and out["value"] == pytest.approx(100.0)


def test_squad_padding_mask_is_batch_wide_as_bytemlperf(tmp_path):
    """Logits are zeroed wherever any row of the batch is padding, so an answer that lies where
    a shorter row of the same batch is padded is lost at batch 2 but found at batch 1."""
    tok, vocab = wordpiece()
    write_squad(tmp_path, [("q1", "Where did the cat sit?", ["rug"]), ("q2", "Who sat?", ["dog"])])
    ds = Squad(tmp_path, tokenizer=tok)
    assert [f.input_mask.count(1) for f in ds.features] == [23, 20]

    def model(inputs):
        ids, seg = inputs["input_ids.1"], inputs["token_type_ids.1"]
        logits = np.ones(ids.shape)
        logits[(ids == vocab["mat"]) & (seg == 1)] = 3.0
        logits[(ids == vocab["rug"]) & (seg == 1)] = 5.0
        return [logits, logits.copy()]

    alone, _ = ds.predictions((b, model(b.inputs)) for b in ds.batches(1))
    together, _ = ds.predictions((b, model(b.inputs)) for b in ds.batches(2))
    # rug is at position 20: padding in row 2
    assert alone["q1"] == "rug" and together["q1"] == "mat"


def test_squad_reference_inputs_for_a_tokeniser_without_cls_and_sep(tmp_path):
    """RoBERTa's vocabulary has no [CLS]/[SEP]: BERT's reference code turns them into the
    unknown token's id; RoBERTa is fed zero token type ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = [
        "<s>",
        "<pad>",
        "</s>",
        "<unk>",
        "the",
        "cat",
        "sat",
        "on",
        "mat",
        ".",
        "dog",
        "a",
        "rug",
        "who",
        "?",
    ]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    write_squad(tmp_path, [("q", "who sat?", ["dog"])])
    ds = Squad(tmp_path, tokenizer=tok, zero_segments=True)
    f = ds.features[0]
    assert (
        f.tokens[:5] == ["[CLS]", "who", "sat", "?", "[SEP]"]
        and f.input_ids[0] == f.input_ids[4] == 3
    )
    assert next(ds.batches(1)).inputs["token_type_ids.1"].max() == 0


def test_get_final_text_projects_onto_the_original_words():
    from kit.datasets.squad_reference import final_text, split_words

    assert final_text("1895", "(1895-1943).") == "1895"
    assert final_text("steve smith", "Steve Smith's") == "Steve Smith"
    assert final_text("den ver", "Denver") == "Denver"  # cannot align: the whole original span
    assert split_words("a  b\u202fc\n d") == ["a", "b", "c", "d"]


def write_jpeg(path, color, size=(300, 260)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path, quality=100)


COLORS = [(255, 0, 0), (0, 255, 0), (0, 0, 255)]


def channel_model(inputs):
    """Scores = mean of each channel: red images -> class 0, green -> 1, blue -> 2."""
    x = next(iter(inputs.values()))
    return [x.mean(axis=(2, 3)) if x.shape[1] == 3 else x.mean(axis=(1, 2))]


def test_imagenet_val_map_preprocessing_and_top1(tmp_path):
    names = []
    for i, color in enumerate(COLORS + [(255, 0, 0)]):
        write_jpeg(tmp_path / "ILSVRC2012_img_val" / f"img{i}.JPEG", color)
        names.append(f"img{i}.JPEG")
    labels = [0, 1, 2, 2]  # the last red image is labelled 2: one miss
    lines = [f"{n} {lab}\n" for n, lab in zip(names, labels, strict=True)] + ["gone.JPEG 1\n"]
    (tmp_path / "val_map.txt").write_text("".join(lines))
    ds = ImageNet(tmp_path)
    assert len(ds) == 4  # a listed image that is not there is skipped, as ByteMLPerf skips it
    batch = next(ds.batches(batch_size=4))
    x = batch.inputs["input_1.1"]
    assert x.shape == (4, 3, 224, 224) and x.dtype == np.float32
    red = [(1 - 0.485) / 0.229, (0 - 0.456) / 0.224, (0 - 0.406) / 0.225]
    row = batch.meta["images"].tolist().index(0)  # shuffled: find image 0 (red)
    np.testing.assert_allclose(x[row].mean(axis=(1, 2)), red, atol=0.05)
    out = ds.evaluate(channel_model, batch_size=2)
    assert out["value"] == pytest.approx(0.75) and out["samples"] == 4
    # ByteMLPerf evaluates full batches only: 4 images at batch 3 -> one batch of 3
    assert ds.evaluate(channel_model, batch_size=3)["samples"] == 3
    assert next(ImageNet(tmp_path, crop=384).batches(1)).inputs["input_1.1"].shape == (
        1,
        3,
        384,
        384,
    )
    with pytest.raises(InvalidParameter, match="full batch"):
        ds.evaluate(channel_model, batch_size=8)


def test_imagenet_batches_follow_bytemlperfs_shuffle():
    import random

    from kit.datasets.base import bytemlperf_batches

    order = list(range(10))
    random.seed(7)
    random.shuffle(order)
    got = bytemlperf_batches(10, 3, 100, shuffle_seed=7)
    assert [b.tolist() for b in got] == [order[0:3], order[3:6], order[6:9]]
    assert len(bytemlperf_batches(10, 3, 50, shuffle_seed=7)) == 1  # int(0.5 * 3)


def test_swin_preprocessing_resizes_to_256_and_pads_the_384_crop_with_zeros(tmp_path):
    """ByteMLPerf's pre_process_imagenet_vit: resize(256) then center_crop(384), which pads."""
    from kit.datasets.imagenet import preprocess

    write_jpeg(tmp_path / "w.png", (255, 255, 255), size=(400, 300))  # resized to 341 x 256
    x = preprocess(tmp_path / "w.png", "torch", 384)
    assert x.shape == (3, 384, 384)
    zero = (0 - np.asarray(IMAGENET_MEAN)) / np.asarray(IMAGENET_STD)  # a padded pixel
    white = (1 - np.asarray(IMAGENET_MEAN)) / np.asarray(IMAGENET_STD)
    # height 256 -> 64 zero rows above and below; width 341 -> 21 zero columns left, 22 right
    np.testing.assert_allclose(x[:, 63, 100], zero, atol=1e-5)
    np.testing.assert_allclose(x[:, 64, 100], white, atol=1e-5)
    np.testing.assert_allclose(x[:, 319, 100], white, atol=1e-5)
    np.testing.assert_allclose(x[:, 320, 100], zero, atol=1e-5)
    np.testing.assert_allclose(x[:, 200, 20], zero, atol=1e-5)
    np.testing.assert_allclose(x[:, 200, 21], white, atol=1e-5)
    np.testing.assert_allclose(x[:, 200, 361], white, atol=1e-5)
    np.testing.assert_allclose(x[:, 200, 362], zero, atol=1e-5)


def test_torchvision_resize_and_crop_arithmetic():
    from PIL import Image

    from kit.datasets.imagenet import torchvision_center_crop, torchvision_resize

    # int(256*500/333)
    assert torchvision_resize(Image.new("RGB", (500, 333)), 256).size == (384, 256)
    assert torchvision_resize(Image.new("RGB", (333, 500)), 256).size == (256, 384)
    arr = np.arange(7 * 5).reshape(7, 5, 1)
    # offsets int(round((7 - 4) / 2)) = 2 (round half to even), int(round((5 - 4) / 2)) = 0
    assert torchvision_center_crop(arr, 4)[0, 0, 0] == arr[2, 0, 0]


def test_vgg_preprocessing_area_resize_and_crop():
    from kit.datasets.imagenet import area_weights, cv2_area_resize, preprocess_vgg

    # 3 -> 2: each output averages 1.5 source pixels by overlap (OpenCV INTER_AREA)
    np.testing.assert_allclose(area_weights(3, 2), [[2 / 3, 1 / 3, 0], [0, 1 / 3, 2 / 3]])
    row = np.array([[[0], [90], [180]]], dtype=np.uint8)
    assert cv2_area_resize(row, 2, 1)[0, :, 0].tolist() == [30, 150]
    # integer factors take OpenCV's fast path: 2x2 rounds half up ((1+1+0+0 + 2) >> 2 = 1, not 0)
    block = np.array([[[1], [1]], [[0], [0]]], dtype=np.uint8)
    assert cv2_area_resize(block, 1, 1)[0, 0, 0] == 1
    from PIL import Image

    img = Image.new("RGB", (320, 300), (200, 100, 50))
    out = preprocess_vgg(img)
    assert out.shape == (224, 224, 3)  # NHWC, 300x320 -> 256 x int(256*320/300)=273, crop 224
    np.testing.assert_allclose(out[5, 5], [200 - 123.68, 100 - 116.78, 50 - 103.94], atol=1e-4)


def test_imagenet_class_folders_and_1001_classes(tmp_path):
    for wnid, color in zip(["n01", "n02", "n03"], COLORS, strict=True):
        write_jpeg(tmp_path / "val" / wnid / "a.jpeg", color, size=(64, 80))
    ds = ImageNet(tmp_path, {"image": "input_tensor:0"}, protocol="vgg", crop=32)
    assert [lab for _, lab in ds.items] == [0, 1, 2]
    assert next(ds.batches(3)).inputs["input_tensor:0"].shape == (3, 32, 32, 3)

    def with_background(inputs):
        scores = channel_model(inputs)[0]
        out = np.full((len(scores), 1001), -999.0)  # TF-slim style: background class first
        out[:, 1:4] = scores
        return [out]

    assert ds.evaluate(with_background, 3)["value"] == 1.0  # argmax == label + 1
    with pytest.raises(MissingResource, match="val_map.txt"):
        len(ImageNet(tmp_path / "empty"))
    with pytest.raises(InvalidParameter, match="protocol"):
        ImageNet(tmp_path, protocol="keras")


def test_imagenet_rule_prepends_zero_to_1000_class_outputs():
    from kit.datasets.imagenet import top1_plus_one

    scores = np.full((2, 1000), -3.0)
    scores[0, 5] = 2.0
    scores[1, 5] = -1.0  # right argmax, but below the prepended 0: ByteMLPerf counts it wrong
    assert top1_plus_one(scores, np.array([5, 5])).tolist() == [True, False]


def criteo_line(label, numbers, cats):
    return ",".join([str(label), *numbers, *cats]) + "\n"


def test_criteo_layout_normalisation_and_rule(tmp_path):
    cats = ["x" * (i + 1) for i in range(26)]  # C_i has length i, so the test hash is i
    row1 = criteo_line(1, [str(i) for i in range(1, 14)], cats)
    nums2 = [str(i + 2) for i in range(1, 14)]
    nums2[1] = ""  # I2 empty -> 0
    cats2 = list(cats)
    cats2[0] = ""  # C1 empty -> "" hashed
    (tmp_path / "eval.csv").write_text(row1 + criteo_line(0, nums2, cats2))
    ds = Criteo(tmp_path, hash_fn=lambda values: [len(v) for v in values])
    labels, numeric, cat = ds.data
    # name-sorted columns: I1, I10, I11, I12, I13, I2, I3, ..., I9; I2 is the only one where row 1
    # is larger
    assert numeric[0].tolist() == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
    assert numeric[1].tolist() == [1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1]
    # categorical names sort with their suffix: "C10_embedding" < "C1_embedding" ('0' < '_')
    order = [
        10,
        11,
        12,
        13,
        14,
        15,
        16,
        17,
        18,
        19,
        1,
        20,
        21,
        22,
        23,
        24,
        25,
        26,
        2,
        3,
        4,
        5,
        6,
        7,
        8,
        9,
    ]
    assert cat[0, :, 0].tolist() == list(range(26)) and cat[0, :, 1].tolist() == order
    assert cat[1, 10, 1] == 0  # empty C1
    batch = next(ds.batches(batch_size=2))
    assert batch.inputs["new_categorical_placeholder:0"].shape == (52, 2)
    assert batch.inputs["new_numeric_placeholder:0"].shape == (2, 13)
    out = ds.evaluate(lambda inputs: [np.array([[0.2, 0.8], [0.5, 0.5]])], batch_size=2)
    assert out["value"] == 1.0  # row 2: 0.5/0.5 rounds to class 0 = label 0


def test_criteo_rejects_unlabelled_file(tmp_path):
    (tmp_path / "eval.csv").write_text(",".join(["1"] * 39) + "\n")
    with pytest.raises(InvalidParameter, match="40 columns"):
        len(Criteo(tmp_path, hash_fn=len))


def write_cifar(root, images, labels, names):
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    data = np.stack([img.transpose(2, 0, 1).reshape(-1) for img in images]).astype(np.uint8)
    with open(folder / "test", "wb") as f:
        pickle.dump({b"data": data, b"fine_labels": labels}, f)
    with open(folder / "meta", "wb") as f:
        pickle.dump({b"fine_label_names": [n.encode() for n in names]}, f)


def test_cifar100_pickle_prompts_and_top1(tmp_path):
    images = [np.full((32, 32, 3), c, dtype=np.uint8) for c in COLORS]
    write_cifar(tmp_path, images, [0, 1, 1], ["red_thing", "green", "blue"])
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {
        w: i
        for i, w in enumerate(
            [
                "<pad>",
                "<unk>",
                "a",
                "photo",
                "of",
                "red",
                "thing",
                "green",
                "blue",
                ".",
                "<start>",
                "<end>",
            ]
        )
    }
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="<start> $A <end>", special_tokens=[("<start>", 10), ("<end>", 11)]
    )
    ds = Cifar100(tmp_path, tokenizer=tok)
    assert ds.text.shape == (3, 77)
    # "a photo of a red thing." -> <start> a photo of a red thing . <end>, zero padded
    assert ds.text[0, :10].tolist() == [10, 2, 3, 4, 2, 5, 6, 9, 11, 0]
    batch = next(ds.batches(batch_size=2))
    assert batch.inputs["image"].shape == (2, 3, 224, 224) and batch.inputs["text"].shape == (3, 77)
    expected = (np.array([1.0, 0.0, 0.0]) - CLIP_MEAN) / CLIP_STD
    np.testing.assert_allclose(batch.inputs["image"][0].mean(axis=(1, 2)), expected, atol=1e-3)
    out = ds.evaluate(lambda inputs: [inputs["image"].mean(axis=(2, 3))], batch_size=1)
    assert out["value"] == 0.66667  # the blue image is labelled 1 (ByteMLPerf rounds to 5 decimals)
    np.save(tmp_path / "text.npy", np.ones((100, 77)))
    assert Cifar100(tmp_path).text.shape == (100, 77)  # precomputed prompts need no tokenizer


CAIL_VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "公司",
    "借款",
    "合同",
    "甲",
    "乙",
    "丙",
    "丁",
    "向",
    "纠",
    "纷",
    "cafe",
    "##s",
    "，",
]


def write_cail(path, lines, vocab=CAIL_VOCAB):
    path.mkdir(parents=True, exist_ok=True)
    (path / "test.json").write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines))
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")


def test_bert4keras_tokeniser_rules():
    """jieba words kept when in the vocabulary, else characters; lower-case + accents dropped;
    a word with no WordPiece match is one [UNK]; bert4keras' pair truncation."""
    from kit.datasets.bert4keras_text import Bert4kerasTokenizer, load_vocab

    vocab = {t: i for i, t in enumerate(CAIL_VOCAB)}
    tok = Bert4kerasTokenizer(vocab, True, lambda text: text.split("|"))  # stands in for jieba
    tokens = tok.tokens("甲|公司|向|乙公司|纠纷|CAFÉS|zz")
    assert tokens[:5] == ["[CLS]", "甲", "公司", "向", "乙"]  # 乙公司 is not in the vocab: split
    # 公 and 司 alone are not in the vocab (ids fall to [UNK]); CAFÉS -> cafes -> cafe ##s
    assert tokens[5:] == ["公", "司", "纠", "纷", "cafe", "##s", "zz", "[SEP]"]
    ids, _ = tok.encode("公", "zz", 10)
    assert ids == [2, 1, 3, 1, 3]  # unknown character, and a word with no WordPiece match
    # without a pre-tokeniser: CJK characters and punctuation are split, then WordPiece
    plain = Bert4kerasTokenizer(vocab)
    assert plain.tokens("甲，乙") == ["[CLS]", "甲", "，", "乙", "[SEP]"]
    # truncation: while too long, drop the token before [SEP] of the longer side (first on ties)
    ids, segs = plain.encode("甲乙丙丁", "甲乙", 7)
    assert [CAIL_VOCAB[i] for i in ids] == ["[CLS]", "甲", "乙", "[SEP]", "甲", "乙", "[SEP]"]
    assert segs == [0, 0, 0, 0, 1, 1, 1]
    ids, _ = plain.encode("甲乙", "丙丁", 6)
    assert [CAIL_VOCAB[i] for i in ids] == ["[CLS]", "甲", "[SEP]", "丙", "丁", "[SEP]"]
    assert load_vocab  # used by from_vocab_file


def test_cail2019_jieba_features_pairs_and_rule(tmp_path):
    lines = [
        {"A": "甲公司借款", "B": "乙公司借款", "C": "丙合同", "label": "B"},
        {"A": "丁合同", "B": "甲借款", "C": "乙合同", "label": "C"},
        {"A": "甲", "B": "乙", "C": "丙", "label": "B"},
    ]
    write_cail(tmp_path, lines)
    ds = Cail2019(tmp_path, max_seq_length=16)
    assert len(ds) == 3
    batch = next(ds.batches(batch_size=4))
    tokens, seg = batch.inputs["input_token:0"], batch.inputs["input_segment:0"]
    assert tokens.dtype == np.float32 and tokens.shape == (4, 16)
    v = {t: i for i, t in enumerate(CAIL_VOCAB)}
    # row 0: [CLS] 甲 公司 借款 [SEP] 乙 公司 借款 [SEP]: jieba keeps 公司 and 借款 whole
    assert tokens[0, :10].tolist() == [
        2,
        v["甲"],
        v["公司"],
        v["借款"],
        3,
        v["乙"],
        v["公司"],
        v["借款"],
        3,
        0,
    ]
    assert seg[0, :9].tolist() == [0] * 5 + [1] * 4

    def overlap(inputs):  # similarity = shared tokens of A and X
        t, s = inputs["input_token:0"], inputs["input_segment:0"]
        return [
            np.array(
                [
                    [len(set(r[(q == 0) & (r > 4)]) & set(r[(q == 1) & (r > 4)]))]
                    for r, q in zip(t, s, strict=True)
                ],
                dtype=np.float32,
            )
        ]

    out = ds.evaluate(overlap, batch_size=2)
    # the last triple ties 0/0
    assert out["samples"] == 3 and out["value"] == pytest.approx(0.66667)
    assert ds.evaluate(overlap, batch_size=4)["samples"] == 2  # full batches only: one of 4 rows
    with pytest.raises(InvalidParameter):
        next(ds.batches(batch_size=3))


def test_cail2019_uses_bytemlperfs_own_features_when_present(tmp_path):
    tokens = np.array([[2, 5, 3, 6, 3], [2, 5, 3, 7, 3]])  # plain arrays: read without unpickling
    np.save(tmp_path / "batch_token_ids.npy", tokens, allow_pickle=False)
    np.save(tmp_path / "batch_segment_ids.npy", np.array([[0, 0, 0, 1, 1]] * 2), allow_pickle=False)
    ds = Cail2019(tmp_path, max_seq_length=8)
    assert ds.arrays["token"][1].tolist() == [2, 5, 3, 7, 3, 0, 0, 0]
    out = ds.evaluate(lambda i: [i["input_token:0"][:, 3:4]], batch_size=2)
    assert out["value"] == 0.0 and "ByteMLPerf's features" in out["inputs"]


def test_cail2019_two_column_output_is_not_comparable(tmp_path):
    write_cail(tmp_path, [{"A": "甲", "B": "乙", "C": "丙", "label": "B"}])
    session = FakeSession(lambda i: [np.tile([[0.3, 0.7]], (len(i["input_token:0"]), 1))])
    res = evaluate_accuracy(
        "roformer-tf-fp32", session, tmp_path, weights=LOCAL, batch_size=2, tokenizer_dir=tmp_path
    )
    assert res.status.startswith(
        "not comparable: CAIL2019 scoring: the model gives 2 scores per row"
    )
    assert res.value is None


def test_cail2019_bad_line_names_the_file_and_line(tmp_path):
    write_cail(tmp_path, [{"A": "甲", "B": "乙", "C": "丙", "label": "X"}])
    with pytest.raises(InvalidParameter, match="test.json line 1"):
        len(Cail2019(tmp_path))


SPECS = (
    InputSpec("src", (1, 3, 4), "float32"),
    InputSpec("src_pad_mask", (1, 5), "int64"),
    InputSpec("ids", (1, 6), "int32"),
    InputSpec("flag", (1, 2), "bool"),
)


def test_fake_dataset_is_seeded_and_follows_bytemlperf_ranges():
    ds = FakeDataset(specs=SPECS)
    a, b = list(ds.batches(2, data_percent=2)), list(ds.batches(2, data_percent=2))
    assert len(a) == 2 and all(
        np.array_equal(x.inputs["src"], y.inputs["src"]) for x, y in zip(a, b, strict=True)
    )
    assert not np.array_equal(a[0].inputs["src"], a[1].inputs["src"])
    x = a[0].inputs
    assert x["src"].shape == (2, 3, 4) and -1 <= x["src"].min() and x["src"].max() < 1
    assert set(np.unique(x["src_pad_mask"])) <= {0, 1} and x["ids"].dtype == np.int32
    assert x["ids"].max() < 1000 and not x["flag"].any()
    out = ds.evaluate(lambda i: [i["src"]], 2, 5, reference=lambda i: [i["src"] + 0.5])
    assert out["value"] == pytest.approx(0.5) and out["max_diff"] == pytest.approx(0.5)
    assert out["std_diff"] == pytest.approx(0.0, abs=1e-6) and out["samples"] == 10


class FakeSession:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def run(self, inputs):
        self.calls += 1
        return self.fn(inputs)


def test_evaluate_accuracy_status(tmp_path):
    missing = evaluate_accuracy(
        "resnet50-torch-fp32", FakeSession(channel_model), tmp_path / "none", weights=LOCAL
    )
    assert missing.value is None and missing.status.startswith("not measured: no dataset (")
    assert str(tmp_path / "none") in missing.status and "val_map.txt" in missing.status
    # the code made with the status, never read from it
    assert missing.code == "no_dataset"
    for i, color in enumerate(COLORS):
        write_jpeg(tmp_path / "img" / f"{i}.jpg", color, size=(40, 40))
    (tmp_path / "img" / "val_map.txt").write_text("0.jpg 0\n1.jpg 1\n2.jpg 0\n")
    session = FakeSession(channel_model)
    rand = evaluate_accuracy(
        "resnet50-torch-fp32", session, tmp_path / "img", weights=RANDOM, batch_size=1
    )
    assert rand.status == "not meaningful: random weights" and rand.value == pytest.approx(
        2 / 3, abs=1e-5
    )
    assert session.calls == 3 and rand.metric == "Top-1" and rand.weights["source"] == "random"
    assert rand.code == "random_weights"
    real = evaluate_accuracy(
        "resnet50-torch-fp32",
        FakeSession(channel_model),
        tmp_path / "img",
        data_percent=34,
        weights=LOCAL,
    )
    # seed-7 shuffle of 3 images puts image 2 (blue, labelled 0: a miss) first
    assert real.status == "measured" and real.details["samples"] == 1 and real.value == 0.0
    assert real.code is None
    other = evaluate_accuracy("resnext101-c2", FakeSession(channel_model), weights=LOCAL)
    assert other.status.startswith("not measured: no published accuracy")
    assert other.code == "no_accuracy_dataset"
    with pytest.raises(InvalidParameter):
        # weights must be stated
        evaluate_accuracy("resnet50-torch-fp32", session, tmp_path / "img")


def test_evaluate_accuracy_squad_with_vocab_dir_and_missing_tokenizer(tmp_path):
    tok, vocab = wordpiece()
    write_squad(tmp_path, [("q1", "Where did the cat sit?", ["the mat"])])
    vocab_dir = tmp_path / "tok"
    vocab_dir.mkdir()
    (vocab_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
    session = FakeSession(PointAt(vocab, [("mat", "mat")]))
    out = evaluate_accuracy(
        "bert-torch-fp32", session, tmp_path, weights=LOCAL, tokenizer_dir=vocab_dir
    )
    assert out.status == "measured" and out.metric == "F1 Score" and out.value == 100.0
    none = evaluate_accuracy(
        "bert-torch-fp32", session, tmp_path, weights=LOCAL, tokenizer_dir=tmp_path / "no-tokenizer"
    )
    assert none.status.startswith("not measured: no tokenizer in") and none.value is None
    assert none.code == "other"  # said by its sentence


def test_evaluate_accuracy_mean_diff_needs_reference():
    session = FakeSession(lambda i: [np.asarray(i["input_ids"], dtype=np.float32)])
    ref = FakeSession(lambda i: [np.asarray(i["input_ids"], dtype=np.float32) + 0.25])

    class Model:  # the parts of ExportedModel that evaluate_accuracy reads
        inputs = (InputSpec("input_ids", (1, 77), "int32"),)
        weights = RANDOM

    none = evaluate_accuracy("clip-onnx-fp32", session, model=Model(), data_percent=1)
    assert (
        none.status.startswith("not measured: no reference session") and none.code == "no_reference"
    )
    out = evaluate_accuracy(
        "clip-onnx-fp32",
        session,
        model=Model(),
        data_percent=1,
        reference_session=ref,
        batch_size=2,
    )
    assert out.metric == "Mean Diff" and out.value == pytest.approx(0.25)
    assert out.status == "not meaningful: random weights"


def test_align_inputs_renames_and_casts():
    specs = (
        InputSpec("input_ids", (1, 4), "int32"),
        InputSpec("attention_mask.1", (1, 4), "int64"),
    )
    out = align_inputs(
        {"input_ids.1": np.ones((1, 4), np.int64), "attention_mask.1": np.ones((1, 4))}, specs
    )
    assert out["input_ids"].dtype == np.int32 and out["attention_mask.1"].dtype == np.int64
    with pytest.raises(InvalidParameter, match="token_type"):
        align_inputs({}, (InputSpec("token_type_ids", (1, 4), "int64"),))


def test_registry_names():
    assert set(DATASETS.names()) == {
        "squad",
        "imagenet",
        "criteo",
        "cail2019",
        "cifar100",
        "fake_dataset",
    }
    with pytest.raises(UnknownNameError, match="known: cail2019"):
        get_dataset("coco")


def make_tar(tmp_path):
    src = tmp_path / "src" / "open_cail2019"
    src.mkdir(parents=True)
    (src / "test.json").write_text('{"A": "a", "B": "b", "C": "c", "label": "B"}\n')
    archive = tmp_path / "open_cail2019.tar"
    with tarfile.open(archive, "w") as t:
        t.add(src, arcname="open_cail2019")
    import hashlib

    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


def test_fetch_file_url_verifies_and_unpacks(tmp_path):
    archive, sha = make_tar(tmp_path)
    dest = tmp_path / "data" / "cail2019"
    logs = []
    fetch("cail2019", dest, url=archive.as_uri(), sha256=sha, log=logs.append)
    assert (dest / "test.json").exists()  # the archive's top folder is flattened
    record = json.loads((dest / "FETCHED.json").read_text())
    assert record[0]["sha256"] == sha and record[0]["pinned"] == "sha256"
    assert not any("warning" in line for line in logs)


def test_fetch_checksum_mismatch_leaves_nothing(tmp_path):
    archive, _ = make_tar(tmp_path)
    dest = tmp_path / "data" / "cail2019"
    with pytest.raises(ChecksumMismatch, match="sha256"):
        fetch("cail2019", dest, url=archive.as_uri(), sha256="0" * 64, log=lambda s: None)
    assert list(dest.iterdir()) == []
    with pytest.raises(ChecksumMismatch, match="bytes, expected 5"):
        verify(archive, Source("file://x", "x.tar", size=5))
    with pytest.raises(ChecksumMismatch, match="md5"):
        verify(archive, Source("file://x", "x.tar", md5="0" * 32))


def test_fetch_offline_says_where_to_put_files(tmp_path):
    def offline(url, timeout=None):
        raise urllib.error.URLError("no route to host")

    with pytest.raises(MissingResource) as err:
        fetch("squad", tmp_path / "squad", opener=offline, accept_unpinned=True)
    message = str(err.value)
    assert (
        "by hand" in message and str(tmp_path / "squad") in message and "dev-v1.1.json" in message
    )


def test_fetch_data_cli_unpinned_source_records_sha(tmp_path, capsys):
    from kit.cli import datasets as cli

    csv_file = tmp_path / "eval.csv"
    csv_file.write_text("1," + ",".join(["0"] * 39) + "\n")
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "fetch-data",
            "criteo",
            "--url",
            csv_file.as_uri(),
            "--dest",
            str(tmp_path / "out"),
            "--accept-unpinned",
        ]
    )
    assert args.func(args) == 0
    assert (tmp_path / "out" / "eval.csv").read_text() == csv_file.read_text()
    assert "no published checksum" in capsys.readouterr().out


def test_fake_dataset_draws_bytemlperfs_seeded_stream():
    """Batch i equals what ByteMLPerf's generator draws after np.random.seed(i), input by input."""
    specs = (
        InputSpec("src", (1, 3, 4), "float32"),
        InputSpec("src_pad_mask", (1, 5), "int64"),
        InputSpec("pix", (1, 2), "int32"),
    )
    batches = list(FakeDataset(specs=specs).batches(2, data_percent=3))
    for i, batch in enumerate(batches):
        np.random.seed(i)
        src = (np.random.random(size=(2, 3, 4)) * 2 - 1).astype(np.float32)
        mask = np.random.randint(low=0, high=2, size=(2, 5)).astype(np.int64)
        pix = np.random.randint(low=0, high=1000, size=(2, 2)).astype(np.int32)
        assert np.array_equal(batch.inputs["src"], src)
        assert np.array_equal(batch.inputs["src_pad_mask"], mask)
        assert np.array_equal(batch.inputs["pix"], pix)


def test_fake_dataset_mean_diff_counts_a_nan_output_as_a_difference():
    ds = FakeDataset(specs=(InputSpec("x", (1, 4), "float32"),))
    out = ds.evaluate(lambda i: [np.full_like(i["x"], np.nan)], 1, 1, reference=lambda i: [i["x"]])
    assert out["value"] > 0.1 and out["nan_count"] == 4


def test_widedeep_is_labelled_top1_as_bytemlperf_reports_it():
    from kit.models import get_entry

    assert get_entry("widedeep-tf-fp32").metric == DATASETS.get("criteo").metric == "Top-1"


def test_cifar100_pickle_that_would_run_code_is_refused(tmp_path):
    """CIFAR's pickles are read by an unpickler that builds data and arrays only."""
    import os

    images = [np.full((32, 32, 3), c, dtype=np.uint8) for c in COLORS]
    write_cifar(tmp_path, images, [0, 1, 1], ["red_thing", "green", "blue"])
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    with open(tmp_path / "cifar-100-python" / "meta", "wb") as f:
        pickle.dump({b"fine_label_names": [Payload()]}, f)
    from kit.datasets.cifar import class_names

    with pytest.raises(KitError, match=r"refused: it refers to (posix|os)\.system, not plain data"):
        class_names(tmp_path)
    assert not marker.exists()


def test_cail2019_pickled_features_are_never_unpickled(tmp_path):
    """np.load(allow_pickle=True) on a fetched archive: a tampered .npy could run code."""
    import os

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    np.save(
        tmp_path / "batch_token_ids.npy",
        np.array([Payload(), [2, 5]], dtype=object),
        allow_pickle=True,
    )
    np.save(tmp_path / "batch_segment_ids.npy", np.array([[0, 0]] * 2))
    with pytest.raises(KitError, match="pickled object arrays, which the kit does not load"):
        len(Cail2019(tmp_path, max_seq_length=8))
    assert not marker.exists()
    # the text is there: encoded instead
    write_cail(tmp_path, [{"A": "甲", "B": "乙", "C": "丙", "label": "B"}])
    ds = Cail2019(tmp_path, max_seq_length=8, tokenizer_dir=tmp_path)
    assert len(ds) == 1 and "encoded" in ds.source and not marker.exists()


def test_fetch_refuses_an_unpinned_download_unless_accepted(tmp_path, capsys):
    """Archives were taken with no checksum; now one must be given, or the risk accepted."""
    from kit.cli.main import main as kit_main
    from kit.datasets.fetch import Unpinned

    archive, sha = make_tar(tmp_path)
    dest = tmp_path / "data" / "cail2019"
    with pytest.raises(Unpinned, match="open_cail2019.tar has no published checksum"):
        fetch("cail2019", dest, url=archive.as_uri(), log=lambda s: None)
    assert not dest.exists() or list(dest.iterdir()) == []
    assert kit_main(["fetch-data", "cail2019", "--url", archive.as_uri(), "--dest", str(dest)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("error: cail2019: open_cail2019.tar has no published checksum")
        and "--sha256" in err
    )
    fetch("cail2019", dest, url=archive.as_uri(), log=lambda s: None, accept_unpinned=True)
    assert json.loads((dest / "FETCHED.json").read_text())[0]["sha256"] == sha

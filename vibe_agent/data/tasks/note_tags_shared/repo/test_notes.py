from notes import Note, Notebook


def test_tagging_one_note_leaves_the_others_alone():
    book = Notebook()
    report = book.add("周报")
    shopping = book.add("购物清单")
    report.tag("工作")
    assert book.titles_tagged("工作") == ["周报"]
    assert shopping.tags == []


def test_notes_made_directly_start_without_tags():
    first = Note("读书笔记")
    first.tag("读书")
    second = Note("旅行计划")
    assert second.tags == []
    assert first.tags == ["读书"]


def test_given_tags_are_kept():
    note = Note("会议纪要", ["工作", "会议"])
    note.tag("会议")
    note.tag("重要")
    assert note.tags == ["工作", "会议", "重要"]


def test_each_notebook_is_separate():
    Notebook().add("草稿").tag("私人")
    assert Notebook().add("草稿").tags == []

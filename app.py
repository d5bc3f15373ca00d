"""StitchLab web app: the router (pages live in views/), sidebar job monitor and device.

The folder is not called pages/: with a pages/ folder, Streamlit 1.67 serves a deep link
(/stitch?run=ID) on a freshly started server as the bare page file, skipping this router.
"""

import streamlit as st

import ui

st.set_page_config(page_title="StitchLab", page_icon="🧵", layout="wide")  # pages repeat it (ui.page_setup)

PAGES = [st.Page(p.file, title=p.title, icon=p.icon, url_path=p.url_path, default=p.default)
         for p in ui.nav.PAGES]  # the one table of pages: ui/nav.py

ui.roles.take_teacher_key()  # class mode: ?key=KEY makes this session the teacher's (the key leaves the URL)
student = ui.student_view()  # a lesson followed as a student: no sidebar, no other pages
page = st.navigation(PAGES, position="hidden" if student else "sidebar")
ui.follow_deep_link(page.url_path)
ui.roles.remember_teacher()  # the teacher's browser keeps a cookie: a reload stays the teacher's
if note := ui.roles.bad_key_note():
    st.warning(note, icon=":material/key_off:")
if ui.roles.refuse_page(page.url_path):  # class mode: a student's session runs the lesson pages only
    st.stop()
if not student:
    with st.sidebar:
        if ui.viewer_mode():
            st.info("Viewer mode: results only, no new jobs.")
        ui.job_monitor()
page.run()
